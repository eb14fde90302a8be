package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// breakdown says where a collector's memory is: the Go heap in use by
// component (from a heap profile), and what the runtime reports (from its
// otelcol_process_* metrics) against the process's resident set.
type breakdown struct {
	rss, anon float64 // VmRSS and its anonymous part, RssAnon
	goSys     float64 // the runtime's Sys: all it took from the OS
	heapAlloc float64 // live and not yet swept heap objects
	// inuse is the heap profile's in-use bytes by component (the leafmost
	// frame in a component package) and by the allocating function's
	// package.
	inuseByComponent, inuseByPackage []share
	inuseTotal                       int64
}

type share struct {
	name  string
	value int64
}

// fileBacked is resident memory mapped from files: the binary's text and
// read-only data, shared and reclaimable.
func (b *breakdown) fileBacked() float64 { return b.rss - b.anon }

// outsideGo is anonymous resident memory the Go runtime did not allocate:
// the embedded store's page caches, which modernc's allocator maps itself.
// It is a lower bound, since Sys also counts what the runtime has
// returned to the OS.
func (b *breakdown) outsideGo() float64 { return max(0, b.anon-b.goSys) }

func memoryBreakdown(ctx context.Context, c *collector, self map[string]float64) (*breakdown, error) {
	m, err := memoryOf(c.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	b := &breakdown{
		rss:       float64(m.rss),
		anon:      float64(m.anon),
		goSys:     sumPrefix(self, "otelcol_process_runtime_total_sys_memory"),
		heapAlloc: sumPrefix(self, "otelcol_process_runtime_heap_alloc"),
	}
	body, err := httpGet(ctx, "http://"+c.pprof+"/debug/pprof/heap")
	if err != nil {
		return nil, fmt.Errorf("heap profile: %w", err)
	}
	defer body.Close()
	p, err := profile.Parse(body)
	if err != nil {
		return nil, fmt.Errorf("heap profile: %w", err)
	}
	b.inuseByComponent, b.inuseByPackage, b.inuseTotal, err = attribute(p, "inuse_space")
	return b, err
}

// attribute sums a profile's samples of one type (inuse_space, cpu) by
// component and by the package of the leaf function, largest first.
func attribute(p *profile.Profile, sampleType string) (byComponent, byPackage []share, total int64, err error) {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == sampleType {
			idx = i
		}
	}
	if idx < 0 {
		return nil, nil, 0, fmt.Errorf("the profile has no %s samples", sampleType)
	}
	components, packages := map[string]int64{}, map[string]int64{}
	for _, s := range p.Sample {
		v := s.Value[idx]
		total += v
		funcs := sampleFunctions(s)
		if len(funcs) == 0 {
			continue
		}
		packages[packageOf(funcs[0])] += v
		components[componentOf(funcs)] += v
	}
	return sortShares(components), sortShares(packages), total, nil
}

// sampleFunctions are a sample's function names, leaf first (inlined
// frames included).
func sampleFunctions(s *profile.Sample) []string {
	var out []string
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function != nil {
				out = append(out, line.Function.Name)
			}
		}
	}
	return out
}

func sortShares(m map[string]int64) []share {
	out := make([]share, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		out = append(out, share{name, m[name]})
	}
	slices.SortStableFunc(out, func(a, b share) int { return cmp.Compare(b.value, a.value) })
	return out
}

// packageOf is the import path of a function's package:
// "github.com/a/b.(*T).M" -> "github.com/a/b".
func packageOf(function string) string {
	if i := strings.IndexByte(function, '['); i >= 0 {
		function = function[:i] // type arguments may hold other packages' paths
	}
	slash := strings.LastIndexByte(function, '/')
	dot := strings.IndexByte(function[slash+1:], '.')
	if dot < 0 {
		return function
	}
	return function[:slash+1+dot]
}

// componentKinds are the path elements under which collector components
// live, in core, contrib and this repository.
var componentKinds = []string{"/receiver/", "/processor/", "/exporter/", "/extension/", "/connector/"}

// componentOf names what a sample is spent for: the leafmost frame that is
// in a component (its package up to the component's own directory), in
// one of this repository's internal packages, or in SQLite; otherwise the
// leaf's package: the runtime, gRPC, and pdata outside any component's
// frame (a receiver's requests are decoded by gRPC before the receiver's
// code runs).
func componentOf(funcs []string) string {
	for _, fn := range funcs {
		pkg := packageOf(fn)
		for _, kind := range componentKinds {
			if i := strings.Index(pkg, kind); i >= 0 {
				rest := pkg[i+len(kind):]
				if j := strings.IndexByte(rest, '/'); j >= 0 {
					rest = rest[:j]
				}
				return pkg[:i+len(kind)] + rest
			}
		}
		if strings.HasPrefix(pkg, "github.com/loom-otel/loom/internal/") || strings.HasPrefix(pkg, "modernc.org/sqlite") {
			return pkg
		}
	}
	return packageOf(funcs[0])
}
