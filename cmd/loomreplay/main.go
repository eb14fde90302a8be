// Command loomreplay sends recorded logs and spans of a real system to an
// OTLP receiver, as the system's collectors would have, with the ground
// truth of the faults injected while they were recorded. It reads the CSV
// layout of the Nezha dataset (a folder per day: trace/HH_MM_trace.csv,
// log/HH_MM_log.csv, and the day's fault list). See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loomreplay:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loomreplay:", err)
		os.Exit(1)
	}
}

type options struct {
	dir      string
	endpoint string
	fault    int
	speed    float64
	truth    string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("loomreplay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dir, "dir", "", "the recorded day: a folder with trace/, log/ and *fault_list.json (required)")
	fs.StringVar(&o.endpoint, "endpoint", "127.0.0.1:4317", "OTLP/gRPC receiver, host:port (plaintext)")
	fs.IntVar(&o.fault, "fault", 0, "replay the three minutes of the n-th fault (1 = the first injected); 0 replays every minute")
	fs.Float64Var(&o.speed, "speed", 0, "replay at this multiple of the recorded pace; 0 sends as fast as the receiver takes it")
	fs.StringVar(&o.truth, "truth", "", "write the faults replayed, one JSON object per line, to this file")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.dir == "":
		return o, errors.New("-dir is required: the folder of one recorded day (tar -xJf the dataset first)")
	case o.fault < 0:
		return o, fmt.Errorf("-fault %d: want 0 (every minute) or a fault's number", o.fault)
	case o.speed < 0:
		return o, fmt.Errorf("-speed %g: want 0 (as fast as possible) or a positive multiple", o.speed)
	}
	return o, nil
}

// run replays o's records and prints what it sent.
func run(ctx context.Context, o options, stdout io.Writer) error {
	day, err := openDay(o.dir)
	if err != nil {
		return err
	}
	minutes, faults, err := day.selection(o.fault)
	if err != nil {
		return err
	}
	records, bad, err := day.load(minutes)
	if err != nil {
		return err
	}
	if len(records) == 0 {
		return fmt.Errorf("no records in %s for minutes %v", o.dir, minutes)
	}
	// Recorded times move so that the last record is now: the replayed
	// records are recent, as a live system's would be.
	shift := nowNanos() - records[len(records)-1].time
	if o.truth != "" {
		if err := writeTruth(o.truth, faults, shift); err != nil {
			return err
		}
	}
	conn, err := grpc.NewClient(o.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("-endpoint %s: %w", o.endpoint, err)
	}
	defer conn.Close()
	sent, err := send(ctx, newOTLP(conn), records, shift, o.speed)
	fmt.Fprintf(stdout, "loomreplay: sent %d spans and %d log records of minutes %v (%d rows that did not parse left out), %d faults, to %s\n",
		sent.spans, sent.logs, minutes, bad, len(faults), o.endpoint)
	for _, f := range faults {
		fmt.Fprintf(stdout, "  fault at %s: %s (%s) on pod %s\n", f.at(shift).Format("15:04:05"), f.Type, serviceOf(f.Pod), f.Pod)
	}
	return err
}
