// Command loomlint is a log-contract gate for CI: it reads a sample of a
// service's output (JSON lines, logfmt, plain text, or OTLP JSON as the
// collector's file exporter writes it), runs it through the goldenfield
// processor exactly as the collector would, and reports, by service and
// stage, the coverage of each golden field, the noise ratio, invalid values
// and raw prompts present. It exits 1 when the sample is below the
// thresholds, 2 when it cannot run.
//
//	loomlint [-config collector.yaml] [-json] [-min-coverage req_id=0.9] [-max-noise 4] [-max-raw-prompts 0] FILE...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loomlint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "collector config whose goldenfield processor to apply (default: the processor's defaults)")
	processorID := fs.String("processor", "goldenfield", "the processor's id in -config, e.g. goldenfield/strict")
	service := fs.String("service", "", "service.name of lines that carry none (default: the file's name)")
	asJSON := fs.Bool("json", false, "write the report as JSON")
	th := defaultThresholds()
	fs.Var(&th.MinCoverage, "min-coverage", "field=share pairs, comma-separated: the least share of records that must carry each field")
	fs.Float64Var(&th.MaxNoise, "max-noise", th.MaxNoise, "the highest noise ratio (records failing validation ÷ valid records) per service")
	fs.IntVar(&th.MaxRawPrompts, "max-raw-prompts", th.MaxRawPrompts, "the most records allowed to carry raw input (prompts)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loomlint [flags] FILE... (- for standard input)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	cfg, err := loadConfig(*configPath, *processorID)
	if err != nil {
		fmt.Fprintf(stderr, "loomlint: %v\n", err)
		return 2
	}
	l, err := newLinter(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "loomlint: %v\n", err)
		return 2
	}
	defer l.close(ctx)
	for _, path := range fs.Args() {
		if err := l.lintFile(ctx, path, *service, stdin); err != nil {
			fmt.Fprintf(stderr, "loomlint: %v\n", err)
			return 2
		}
	}
	rep := l.report(th)
	if *asJSON {
		err = rep.writeJSON(stdout)
	} else {
		err = rep.writeText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "loomlint: %v\n", err)
		return 2
	}
	if len(rep.Failures) > 0 {
		return 1
	}
	return 0
}

var errNoRecords = errors.New("no records")
