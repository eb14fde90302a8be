// Command loomrca runs Loom's root-cause localizer (internal/rootcause) on
// files: one case (localize) or a whole rcabench folder, scored (bench).
//
//	loomrca localize --format riskloc CASE.csv[.gz]
//	loomrca localize --format counts --at UNIX_SECONDS CASE.csv[.gz]
//	loomrca bench [--format riskloc|counts] [--cases N] [-v] DIR
//
// localize prints the ranked root causes with their evidence, and last the
// root-cause set in the rcabench encoding (an empty line for none).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/loom-otel/loom/internal/rootcause"
	"github.com/loom-otel/loom/internal/rootcause/rcabench"
)

const usage = `usage:
  loomrca localize --format riskloc CASE.csv[.gz]
  loomrca localize --format counts --at UNIX_SECONDS CASE.csv[.gz]
  loomrca bench [--format riskloc|counts] [--cases N] [-v] DIR
`

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "loomrca:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	switch args[0] {
	case "localize":
		return localize(args[1:], stdout, stderr)
	case "bench":
		return bench(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "loomrca: unknown command %q\n", args[0])
	return errUsage
}

// command is a subcommand's flags: --format, its own, and one argument.
type command struct {
	*flag.FlagSet
	format   *string
	argument string // what the one argument is, for the usage error
	stderr   io.Writer
}

func newCommand(name, argument string, stderr io.Writer) command {
	fs := flag.NewFlagSet("loomrca "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", string(rcabench.Riskloc), "case format: riskloc (leaf rows with real, predict) or counts (min, value, cnt per leaf and minute)")
	return command{FlagSet: fs, format: format, argument: argument, stderr: stderr}
}

// parse parses the arguments and returns the format.
func (c command) parse(args []string) (rcabench.Format, error) {
	if err := c.Parse(args); err != nil {
		return "", err
	}
	format, err := rcabench.ParseFormat(*c.format)
	if err != nil {
		return "", fmt.Errorf("--format: %w", err)
	}
	if c.NArg() != 1 {
		fmt.Fprintf(c.stderr, "%s: want exactly one %s\n", c.Name(), c.argument)
		return "", errUsage
	}
	return format, nil
}

func localize(args []string, stdout, stderr io.Writer) error {
	fs := newCommand("localize", "case file", stderr)
	at := fs.Int64("at", 0, "counts format: the anomalous minute, unix seconds (earlier minutes are the baseline)")
	format, err := fs.parse(args)
	if err != nil {
		return err
	}
	if format == rcabench.Counts && !flagSet(fs.FlagSet, "at") {
		return errors.New("--format counts needs --at UNIX_SECONDS, the anomalous minute")
	}
	loc, err := rcabench.LocalizeFile(fs.Arg(0), format, *at, rootcause.Options{})
	if err != nil {
		return err
	}
	for i, c := range loc.Candidates {
		fmt.Fprintf(stdout, "%d\t%s\tscore=%.1f\tdeviation=%+.3f\tinside: real=%.6g predict=%.6g total=%.6g leaves=%d\toutside: real=%.6g predict=%.6g total=%.6g leaves=%d\n",
			i+1, c.Element, c.Score, c.Deviation,
			c.Inside.Real, c.Inside.Predict, c.Inside.Total, c.Inside.Leaves,
			c.Outside.Real, c.Outside.Predict, c.Outside.Total, c.Outside.Leaves)
	}
	fmt.Fprintf(stdout, "# %d root causes in %.3fs\n", len(loc.Candidates), loc.Elapsed.Seconds())
	fmt.Fprintln(stdout, rcabench.SetOf(loc.Candidates))
	return nil
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func bench(args []string, stdout, stderr io.Writer) error {
	fs := newCommand("bench", "folder", stderr)
	cases := fs.Int("cases", 0, "score only the first N cases of injection_info (0: all)")
	verbose := fs.Bool("v", false, "print every case: its id, TP FP FN, seconds, and the answer")
	format, err := fs.parse(args)
	if err != nil {
		return err
	}
	var progress func(rcabench.CaseResult)
	if *verbose {
		progress = func(c rcabench.CaseResult) {
			fmt.Fprintf(stdout, "%s\tTP=%d FP=%d FN=%d\t%.3fs (cpu %.3fs)\tanswer=%s\ttruth=%s\n",
				c.ID, c.Tally.TP, c.Tally.FP, c.Tally.FN, c.Elapsed.Seconds(), c.CPU.Seconds(), c.Answer, c.Truth)
		}
	}
	rep, err := rcabench.Bench(fs.Arg(0), format, rootcause.Options{}, *cases, progress)
	if err != nil {
		return err
	}
	mean, maxSeconds := rep.Seconds()
	meanCPU, maxCPU := rep.CPUSeconds()
	t := rep.Tally
	fmt.Fprintf(stdout, "%s: cases=%d F1=%.3f precision=%.3f recall=%.3f mean_case_F1=%.3f TP=%d FP=%d FN=%d mean_s=%.3f max_s=%.3f mean_cpu_s=%.3f max_cpu_s=%.3f\n",
		fs.Arg(0), len(rep.Cases), t.F1(), t.Precision(), t.Recall(), rep.MeanF1(), t.TP, t.FP, t.FN, mean, maxSeconds, meanCPU, maxCPU)
	return nil
}
