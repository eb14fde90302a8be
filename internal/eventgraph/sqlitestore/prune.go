package sqlitestore

import (
	"context"
	"fmt"
	"time"
)

// pruneChunk bounds the events one delete transaction removes, so that writes
// wait at most that long for the lock.
const pruneChunk = 5000

// Prune applies the retention bounds as of now: it deletes the events older
// than MaxAge, then the oldest events until the used pages fit in MaxBytes
// (aiming at 90% of it, so that it does not run on every call), with their
// causes and the requests whose last event is gone, then returns the freed
// pages to the file system. It returns how many events it deleted.
func (s *Store) Prune(ctx context.Context, now time.Time) (int64, error) {
	var deleted int64
	if s.opts.MaxAge > 0 {
		n, err := s.deleteBefore(ctx, now.Add(-s.opts.MaxAge).UnixNano())
		deleted += n
		if err != nil {
			return deleted, err
		}
	}
	if s.opts.MaxBytes > 0 {
		for {
			n, err := s.shrink(ctx)
			deleted += n
			if err != nil {
				return deleted, err
			}
			if n == 0 {
				break
			}
		}
	}
	if deleted > 0 {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, err := s.db.ExecContext(ctx, `PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			return deleted, fmt.Errorf("sqlitestore: vacuum: %w", err)
		}
	}
	return deleted, nil
}

// UsedBytes is the size of the file's pages in use (the file minus its free pages).
func (s *Store) UsedBytes(ctx context.Context) (int64, error) {
	var pages, free, size int64
	err := s.db.QueryRowContext(ctx, `SELECT p.page_count, f.freelist_count, s.page_size
		FROM pragma_page_count() p, pragma_freelist_count() f, pragma_page_size() s`).Scan(&pages, &free, &size)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: used bytes: %w", err)
	}
	return (pages - free) * size, nil
}

// shrink deletes the oldest share of the events that should bring the used
// pages to 90% of MaxBytes; 0 when they already fit.
func (s *Store) shrink(ctx context.Context) (int64, error) {
	used, err := s.UsedBytes(ctx)
	if err != nil || used <= s.opts.MaxBytes {
		return 0, err
	}
	var count int64
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&count); err != nil || count == 0 {
		return 0, err
	}
	share := 1 - 0.9*float64(s.opts.MaxBytes)/float64(used)
	n := max(1, int64(share*float64(count)))
	var cutoff int64
	if err := s.db.QueryRowContext(ctx, `SELECT time_ns FROM events ORDER BY time_ns LIMIT 1 OFFSET ?`, n-1).Scan(&cutoff); err != nil {
		return 0, fmt.Errorf("sqlitestore: retention cutoff: %w", err)
	}
	return s.deleteBefore(ctx, cutoff+1)
}

// deleteBefore deletes the events before the cutoff, chunk by chunk, then the requests that ended before it.
func (s *Store) deleteBefore(ctx context.Context, cutoffNs int64) (int64, error) {
	var deleted int64
	for {
		n, err := s.locked(ctx, `DELETE FROM events WHERE rowid IN (SELECT rowid FROM events WHERE time_ns < ? LIMIT ?)`, cutoffNs, pruneChunk)
		deleted += n
		if err != nil {
			return deleted, fmt.Errorf("sqlitestore: retention: %w", err)
		}
		if n < pruneChunk {
			break
		}
	}
	if _, err := s.locked(ctx, `DELETE FROM requests WHERE last_ns < ?`, cutoffNs); err != nil {
		return deleted, fmt.Errorf("sqlitestore: retention: %w", err)
	}
	if err := s.deleteDimLists(ctx, cutoffNs); err != nil {
		return deleted, fmt.Errorf("sqlitestore: retention: %w", err)
	}
	return deleted, nil
}

// deleteDimLists deletes the lists of dimension values whose last event was
// before the cutoff, and forgets which lists are stored.
func (s *Store) deleteDimLists(ctx context.Context, cutoffNs int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.db.ExecContext(ctx, `DELETE FROM dim_lists WHERE last_ns < ?`, cutoffNs)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		clear(s.lists.ids)
		return err
	}
	return nil
}

func (s *Store) locked(ctx context.Context, query string, args ...any) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
