package rcaextension

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

//go:embed templates/*.html
var templateFiles embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"requestPath": func(id string) string { return "/requests/" + url.PathEscape(id) },
	"apiPath":     func(id string) string { return "/api/requests/" + url.PathEscape(id) },
	"comparePath": func(id string) string { return "/requests/" + url.PathEscape(id) + "/compare" },
	"clock":       func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"stamp":       func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"percent":     func(share float64) float64 { return 100 * share },
	"attrNames": func(m map[string]any) []string {
		names := make([]string, 0, len(m))
		for k := range m {
			names = append(names, k)
		}
		slices.Sort(names)
		return names
	},
}).ParseFS(templateFiles, "templates/*.html"))

// overviewPage is the first screen: the failing requests of the window,
// over time and newest first.
type overviewPage struct {
	Failing      *failingView
	Ranking      *rootCauseView
	Refreshing   bool
	RankingError string
	Window       time.Duration
	Chart        chart
}

// chart draws a window's failing requests per interval as bars.
type chart struct {
	Width, Height int
	Bars          []chartBar
	// Drifts mark the schema changes found in the window.
	Drifts   []chartMark
	Max      int
	From, To string
}

type chartBar struct {
	X, Y, W, H int
	Title      string
}

type chartMark struct {
	X     int
	Title string
}

func drawChart(v *failingView) chart {
	const width, height, top = 900, 120, 14
	c := chart{Width: width, Height: height + 18, From: v.Window.From.UTC().Format("15:04:05"), To: v.Window.To.UTC().Format("15:04:05")}
	for _, in := range v.Intervals {
		c.Max = max(c.Max, in.Failing)
	}
	w := width / max(len(v.Intervals), 1)
	for i, in := range v.Intervals {
		h := 0
		if c.Max > 0 {
			h = (height - top) * in.Failing / c.Max
		}
		c.Bars = append(c.Bars, chartBar{X: i * w, Y: height - h, W: w - 2, H: h,
			Title: in.From.UTC().Format("15:04:05") + ": " + strconv.Itoa(in.Failing) + " failing"})
	}
	span := v.Window.To.Sub(v.Window.From)
	for _, d := range v.Drifts {
		x := int(float64(width) * float64(d.Time.Sub(v.Window.From)) / float64(max(span, 1)))
		c.Drifts = append(c.Drifts, chartMark{X: min(max(x, 1), width-1), Title: d.Time.UTC().Format("15:04:05") + ": " + d.Message})
	}
	return c
}

// requestPage is one request: its verdict, its timeline and its events.
type requestPage struct {
	*requestView
	Timeline timeline
}

func overviewPageOf(v *overviewView) any {
	return overviewPage{Failing: v.failingView, Ranking: v.Ranking, Refreshing: v.Refreshing, RankingError: v.RankingError,
		Window: v.Window.To.Sub(v.Window.From), Chart: drawChart(v.failingView)}
}

func requestPageOf(v *requestView) any {
	return requestPage{requestView: v, Timeline: layoutTimeline(v.events)}
}

// comparePage is a failing request beside the nearest healthy one.
type comparePage struct {
	*comparisonView
	BadTimeline, GoodTimeline timeline
}

func comparePageOf(v *comparisonView) any {
	p := comparePage{comparisonView: v, BadTimeline: layoutTimeline(v.bad.events)}
	if v.good != nil {
		p.GoodTimeline = layoutTimeline(v.good.events)
	}
	return p
}

// servePage renders the template name from page(view) whole, or a 500 when
// the template fails; a view load cannot make is an error page.
func servePage[T any](load func(*http.Request) (T, error), name string, page func(T) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := load(r)
		if err != nil {
			writePageError(w, err)
			return
		}
		var buf bytes.Buffer
		if err := pages.ExecuteTemplate(&buf, name, page(v)); err != nil {
			http.Error(w, "rendering the page failed", http.StatusInternalServerError)
			return
		}
		setPageHeaders(w)
		_, _ = buf.WriteTo(w)
	}
}

func writePageError(w http.ResponseWriter, err error) {
	status, message := statusOf(err)
	var buf bytes.Buffer
	if pages.ExecuteTemplate(&buf, "error.html", map[string]any{"Status": status, "Message": message}) != nil {
		http.Error(w, message, status)
		return
	}
	setPageHeaders(w)
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// setPageHeaders: the page loads nothing from anywhere, runs no script and
// is not framed.
func setPageHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'")
}
