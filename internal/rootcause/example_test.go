package rootcause_test

import (
	"fmt"

	"github.com/loom-otel/loom/internal/rootcause"
)

// Request counts per minute and combination of two dimensions: ten
// baseline minutes with 2% failing everywhere, then a minute in which
// model_ver=v2 fails 30% of its requests in both regions.
func ExampleFromCounts() {
	var rows []rootcause.CountRow
	for minute := int64(0); minute <= 600; minute += 60 {
		for _, model := range []string{"v1", "v2", "v3"} {
			for _, region := range []string{"eu", "us"} {
				failing := 2.0
				if minute == 600 && model == "v2" {
					failing = 30
				}
				rows = append(rows, rootcause.CountRow{
					Minute: minute,
					Terms:  []rootcause.Term{{Dim: "model_ver", Value: model}, {Dim: "region", Value: region}},
					Value:  failing, // failing requests, weighted by sampling.adjusted_count
					Count:  100,     // all requests, weighted alike
				})
			}
		}
	}
	leaves, err := rootcause.FromCounts(rows, 600) // minute 600 against the minutes before
	if err != nil {
		panic(err)
	}
	cands, err := rootcause.Localize(leaves, rootcause.Options{})
	if err != nil {
		panic(err)
	}
	for _, c := range cands {
		fmt.Printf("%s: %+.2f failure rate; failing %.0f of %.0f inside, %.0f of %.0f outside\n",
			c.Element, c.Deviation, c.Inside.Real, c.Inside.Total, c.Outside.Real, c.Outside.Total)
	}
	// Output:
	// model_ver=v2: +0.28 failure rate; failing 60 of 200 inside, 8 of 400 outside
}
