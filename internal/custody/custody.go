// Package custody keeps the records a processor has taken over (the sender
// was told they were accepted) and not yet handed on, in a storage extension,
// so that a crash loses none of them: each entry is written before the
// sender's call returns and deleted once the next consumer has returned.
// After a crash, Replay returns what was left.
package custody // import "github.com/loom-otel/loom/internal/custody"

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Kind tells apart what a processor keeps: the records as they arrived, or
// their decided, outgoing form (replayed as is, so a redelivery is identical).
type Kind byte

// Seq names one entry, and carries its kind in its low byte, so that the
// data is stored as the caller encoded it; a journal never reuses one.
type Seq uint64

// Kind is the kind the entry was numbered for.
func (s Seq) Kind() Kind { return Kind(s) }

// Entry is one record set left in the journal.
type Entry struct {
	Seq  Seq
	Data []byte
}

// Journal is one processor's entries in its storage client.
type Journal struct {
	client storage.Client
	walker storage.Walker
	next   atomic.Uint64
	closed sync.Once
}

// Open gets the journal of the component id from the storage extension
// storageID; key is the config key naming it, for errors.
func Open(ctx context.Context, host component.Host, storageID component.ID, kind component.Kind, id component.ID, name, key string) (*Journal, error) {
	ext, ok := host.GetExtensions()[storageID]
	if !ok {
		return nil, fmt.Errorf("%s: no extension %q: add it to service::extensions", key, storageID)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("%s: extension %q is not a storage extension (file_storage is)", key, storageID)
	}
	client, err := se.GetClient(ctx, kind, id, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	walker, ok := client.(storage.Walker)
	if !ok {
		_ = client.Close(ctx)
		return nil, fmt.Errorf("%s: storage %q cannot list its entries, which replay after a crash needs: use file_storage", key, storageID)
	}
	return &Journal{client: client, walker: walker}, nil
}

func keyOf(seq Seq) string { return strconv.FormatUint(uint64(seq), 36) }

// Next numbers an entry of this kind about to be kept.
func (j *Journal) Next(kind Kind) Seq { return Seq(j.next.Add(1)<<8 | uint64(kind)) }

// Keep writes entries, numbered by Next, in one transaction.
func (j *Journal) Keep(ctx context.Context, entries ...Entry) error {
	ops := make([]*storage.Operation, len(entries))
	for i, e := range entries {
		ops[i] = storage.SetOperation(keyOf(e.Seq), e.Data)
	}
	return j.client.Batch(ctx, ops...)
}

// Replace swaps entries for one, numbered by Next, in one transaction:
// records that were decided or stitched are kept in their outgoing form
// until they are handed on, so that a replay hands on the same bytes.
func (j *Journal) Replace(ctx context.Context, old []Seq, e Entry) error {
	ops := make([]*storage.Operation, 0, len(old)+1)
	for _, s := range old {
		ops = append(ops, storage.DeleteOperation(keyOf(s)))
	}
	return j.client.Batch(ctx, append(ops, storage.SetOperation(keyOf(e.Seq), e.Data))...)
}

// Release deletes entries whose records the next consumer has returned from.
func (j *Journal) Release(ctx context.Context, seqs ...Seq) error {
	if len(seqs) == 0 {
		return nil
	}
	ops := make([]*storage.Operation, len(seqs))
	for i, s := range seqs {
		ops[i] = storage.DeleteOperation(keyOf(s))
	}
	return j.client.Batch(ctx, ops...)
}

// Replay returns every entry left, oldest first, and continues numbering
// after them. The entries stay until released.
func (j *Journal) Replay(ctx context.Context) ([]Entry, error) {
	var entries []Entry
	var bad []string
	err := j.walker.Walk(ctx, func(key string, value []byte) ([]*storage.Operation, error) {
		if seq, perr := strconv.ParseUint(key, 36, 64); perr == nil {
			entries = append(entries, Entry{Seq: Seq(seq), Data: slices.Clone(value)})
		} else {
			bad = append(bad, key)
		}
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%d entries of the journal are not Loom's (first key %q): is the storage shared with another component?", len(bad), bad[0])
	}
	slices.SortFunc(entries, func(a, b Entry) int { return cmp.Compare(a.Seq, b.Seq) })
	if n := len(entries); n > 0 {
		j.next.Store(uint64(entries[n-1].Seq) >> 8)
	}
	return entries, nil
}

// Close closes the storage client; entries not released stay for Replay.
func (j *Journal) Close(ctx context.Context) error {
	if j == nil {
		return nil
	}
	var err error
	j.closed.Do(func() { err = j.client.Close(ctx) })
	return err
}

// ClientKey tells apart the clients whose records must not be passed on
// together: held records of one key share one call downstream, with the
// context of one of them. It is empty for records that came without client
// metadata or auth.
func ClientKey(ctx context.Context) string {
	info := client.FromContext(ctx)
	var b strings.Builder
	for _, k := range slices.Sorted(info.Metadata.Keys()) {
		fmt.Fprintf(&b, "%s=%q;", k, info.Metadata.Get(k))
	}
	if info.Auth != nil {
		for _, name := range slices.Sorted(slices.Values(info.Auth.GetAttributeNames())) {
			fmt.Fprintf(&b, "auth.%s=%v;", name, info.Auth.GetAttribute(name))
		}
	}
	return b.String()
}

// CheckPipelines refuses a journal to a component that n pipelines of one
// signal use: after a crash, the records it kept could not be told apart by
// pipeline. key is the storage key, for the error.
func CheckPipelines(key string, id component.ID, signal string, n int) error {
	if n <= 1 {
		return nil
	}
	return fmt.Errorf("%s: %s is in %d %s pipelines, and after a crash the records it kept could not be told apart by pipeline: "+
		"give each pipeline a %s of its own (%s/a, %s/b)", key, id, n, signal, id.Type(), id.Type(), id.Type())
}
