package tenant

import (
	"errors"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.uber.org/zap"
)

func TestSends(t *testing.T) {
	retry := errors.New("503")
	permanent := consumererror.NewPermanent(errors.New("400"))
	partial := func(err error, failed map[string]bool) error {
		if len(failed) != 1 || !failed["b"] {
			t.Errorf("retry of %v, want only b", failed)
		}
		return errors.Join(errors.New("partial"), err)
	}
	run := func(results map[string]error) error {
		var tenants []string
		for _, id := range []string{"a", "b", "c"} {
			if _, ok := results[id]; ok {
				tenants = append(tenants, id)
			}
		}
		return Send(tenants, 2, func(id string) error { return results[id] }).Err(zap.NewNop(), partial)
	}

	if err := run(map[string]error{"a": nil, "b": nil}); err != nil {
		t.Fatalf("all sent: %v", err)
	}
	if err := run(map[string]error{"a": permanent, "b": nil}); !consumererror.IsPermanent(err) {
		t.Fatalf("only permanent failures: %v, want permanent", err)
	}
	if err := run(map[string]error{"a": nil, "b": retry}); err == nil || consumererror.IsPermanent(err) || err.Error()[:7] != "partial" {
		t.Fatalf("one of two tenants failed: %v, want a partial retry", err)
	}
	err := run(map[string]error{"a": permanent, "b": retry})
	if err == nil || consumererror.IsPermanent(err) {
		t.Fatalf("permanent beside retryable: %v, want retryable (the permanent one is logged)", err)
	}
	if err := run(map[string]error{"b": retry}); err == nil || consumererror.IsPermanent(err) {
		t.Fatalf("every tenant failed: %v, want retryable", err)
	}
}

func TestSendBoundsConcurrency(t *testing.T) {
	const maxConcurrent = 3
	tenants := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	entered := make(chan struct{})
	release := make(chan struct{})
	running := make(chan *Sends)
	go func() {
		running <- Send(tenants, maxConcurrent, func(string) error {
			entered <- struct{}{}
			<-release
			return nil
		})
	}()
	for range maxConcurrent {
		<-entered
	}
	select {
	case <-entered:
		t.Fatalf("a send started while %d were in flight", maxConcurrent)
	default:
	}
	close(release)
	for range len(tenants) - maxConcurrent {
		<-entered
	}
	if err := (<-running).Err(zap.NewNop(), nil); err != nil {
		t.Fatal(err)
	}
}
