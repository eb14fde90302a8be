package rcaextension

import (
	"strconv"
	"strings"
	"time"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/extract"
)

// The timeline's geometry, in SVG user units.
const (
	plotLeft    = 190 // lane labels to the left
	plotWidth   = 900
	rowHeight   = 16
	laneGap     = 8
	markRow     = 14 // the row of log and GPU marks under a lane's spans
	axisHeight  = 22
	minBarWidth = 2
)

// timeline is a request drawn as lanes: one per service, and one per service
// for its work detached from the request's trace; spans are bars, log records
// dots and GPU driver events diamonds, failing events red.
type timeline struct {
	Width, Height int
	Lanes         []lane
	Bars          []bar
	Marks         []mark
	Ticks         []tick
}

type lane struct {
	Label string
	Y     int // the top of the lane
	Async bool
}

type bar struct {
	X, Y, W, H int
	Failed     bool
	Title      string
}

type mark struct {
	X, Y   int
	GPU    bool
	Failed bool
	Title  string
}

type tick struct {
	X     int
	Label string
}

// layoutTimeline draws events (in time order).
func layoutTimeline(events []eventgraph.Event) timeline {
	if len(events) == 0 {
		return timeline{Width: plotLeft + plotWidth, Height: axisHeight}
	}
	start, end := span(events)
	async := map[string]bool{} // traces of detached work
	for i := range events {
		if e := &events[i]; e.AsyncOf != "" && e.TraceID != "" {
			async[e.TraceID] = true
		}
	}
	length := max(end.Sub(start), time.Millisecond)
	x := func(t time.Time) int { return plotLeft + int(float64(plotWidth)*float64(t.Sub(start))/float64(length)) }

	type laneKey struct {
		service string
		async   bool
	}
	type laneRows struct {
		index   int
		rowEnds []int // the x where each row's last bar ends
		bars    []int // indexes into tl.Bars, to place once the lane's rows are known
		marks   []int
	}
	var tl timeline
	lanes := map[laneKey]*laneRows{}
	var order []*laneRows
	for i := range events {
		e := &events[i]
		k := laneKey{e.Service, async[e.TraceID]}
		l := lanes[k]
		if l == nil {
			label := e.Service
			if label == "" {
				label = "(no service)"
			}
			if k.async {
				label += " · async"
			}
			l = &laneRows{index: len(tl.Lanes)}
			lanes[k] = l
			order = append(order, l)
			tl.Lanes = append(tl.Lanes, lane{Label: label, Async: k.async})
		}
		title := eventTitle(e)
		if e.Kind == eventgraph.KindSpan && !e.End.IsZero() {
			x0 := x(e.Time)
			w := max(x(e.End)-x0, minBarWidth)
			row := 0
			for row < len(l.rowEnds) && l.rowEnds[row] > x0 {
				row++
			}
			if row == len(l.rowEnds) {
				l.rowEnds = append(l.rowEnds, 0)
			}
			l.rowEnds[row] = x0 + w
			l.bars = append(l.bars, len(tl.Bars))
			tl.Bars = append(tl.Bars, bar{X: x0, Y: row, W: w, H: rowHeight - 4, Failed: e.Failed, Title: title})
			continue
		}
		l.marks = append(l.marks, len(tl.Marks))
		tl.Marks = append(tl.Marks, mark{X: x(e.Time), GPU: e.GPU != "" && e.Kind == eventgraph.KindLog, Failed: e.Failed, Title: title})
	}
	y := laneGap
	for _, l := range order {
		tl.Lanes[l.index].Y = y
		for _, b := range l.bars {
			tl.Bars[b].Y = y + tl.Bars[b].Y*rowHeight
		}
		y += len(l.rowEnds) * rowHeight
		for _, m := range l.marks {
			tl.Marks[m].Y = y + markRow/2
		}
		y += markRow + laneGap
	}
	for i := 0; i <= 4; i++ {
		offset := length * time.Duration(i) / 4
		tl.Ticks = append(tl.Ticks, tick{X: x(start.Add(offset)), Label: "+" + formatOffset(offset)})
	}
	tl.Width, tl.Height = plotLeft+plotWidth+40, y+axisHeight
	return tl
}

// span is when a request's events (in time order, at least one) begin and end.
func span(events []eventgraph.Event) (first, last time.Time) {
	first, last = events[0].Time, events[0].Time
	for i := range events {
		last = latest(last, events[i].Time, events[i].End)
	}
	return first, last
}

func latest(t time.Time, more ...time.Time) time.Time {
	for _, m := range more {
		if m.After(t) {
			t = m
		}
	}
	return t
}

func formatOffset(d time.Duration) string {
	if d < time.Second {
		return strings.TrimSuffix(strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64), ".0") + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
}

// eventTitle is the tooltip of an event's bar or mark.
func eventTitle(e *eventgraph.Event) string {
	text := e.Name
	if text == "" {
		text = e.Message
	}
	if e.Stage != "" {
		text = e.Stage + ": " + text
	}
	if e.Kind == eventgraph.KindSpan && !e.End.IsZero() {
		text += " (" + formatOffset(e.End.Sub(e.Time)) + ")"
	}
	return extract.TruncateUTF8(text, 300)
}
