// Package custodytest runs a real file_storage extension for the tests of
// the components that keep records in custody.
package custodytest // import "github.com/loom-otel/loom/internal/custody/custodytest"

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/plog"
)

// ID is the storage extension's ID in the host FileStorage returns.
var ID = component.MustNewIDWithName("file_storage", "test")

// FileStorage starts a file_storage extension on dir and returns a host that
// has it as ID. A second one on the same dir, after the components using the
// first closed their clients, is what a restarted collector finds.
func FileStorage(t testing.TB, dir string) component.Host {
	t.Helper()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = dir
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(context.Background(), Host{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ext.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return Host{ID: ext}
}

// Host is a component.Host with the given extensions.
type Host map[component.ID]component.Component

// GetExtensions implements component.Host.
func (h Host) GetExtensions() map[component.ID]component.Component { return h }

// Snapshot copies the storage files in dir as a SIGKILL would leave them at
// this moment (every returned write is in them), for a second FileStorage to
// start from while the first still runs.
func Snapshot(t testing.TB, dir string) string {
	t.Helper()
	to := t.TempDir()
	if err := os.CopyFS(to, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	return to
}

// StuckLogs records the logs it is given and does not return from its first
// call until Release: the process dies while it passes records on.
type StuckLogs struct {
	consumertest.LogsSink
	// Called is closed once the first call has its records.
	Called  chan struct{}
	release chan struct{}
	once    sync.Once
}

// NewStuckLogs returns a StuckLogs that has not been called.
func NewStuckLogs() *StuckLogs {
	return &StuckLogs{Called: make(chan struct{}), release: make(chan struct{})}
}

// ConsumeLogs implements consumer.Logs.
func (s *StuckLogs) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	err := s.LogsSink.ConsumeLogs(ctx, ld)
	s.once.Do(func() {
		close(s.Called)
		<-s.release
	})
	return err
}

// Release lets the first call return.
func (s *StuckLogs) Release() { close(s.release) }
