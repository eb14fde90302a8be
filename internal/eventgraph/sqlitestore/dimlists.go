package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// dimLists stores each list of dimension values (an event's Dims, as JSON)
// once, in table dim_lists, which events refer to by dim_list: most events
// of a service instance carry the same list, its resource's, and written
// on every event it was a quarter of the row. Each list keeps the latest
// time of the events that refer to it (last_ns), so that retention deletes
// it with the last of them.
type dimLists struct {
	// ids are the ids of lists stored, by their JSON, so that a Write looks
	// a list up in the file only the first time it meets it. Prune forgets
	// them when it deletes lists; past maxKnownDimLists they start again.
	ids map[string]int64
	// add stores a list or raises its last_ns, and returns its id; touch
	// raises a list's last_ns; touchEvents raises that of a stored event's list.
	add, touch, touchEvents *sql.Stmt
}

const maxKnownDimLists = 4096

func prepareDimLists(ctx context.Context, db *sql.DB) (dimLists, error) {
	l := dimLists{ids: map[string]int64{}}
	var err error
	for _, prepare := range []struct {
		into  **sql.Stmt
		query string
	}{
		{&l.add, `INSERT INTO dim_lists (list, last_ns) VALUES (?1, ?2)
			ON CONFLICT (list) DO UPDATE SET last_ns = max(last_ns, excluded.last_ns) RETURNING id`},
		{&l.touch, `UPDATE dim_lists SET last_ns = max(last_ns, ?2) WHERE id = ?1`},
		{&l.touchEvents, `UPDATE dim_lists SET last_ns = max(last_ns, ?2) WHERE id = (SELECT dim_list FROM events WHERE event_id = ?1)`},
	} {
		if *prepare.into, err = db.PrepareContext(ctx, prepare.query); err != nil {
			return l, errors.Join(fmt.Errorf("sqlitestore: prepare: %w", err), l.close())
		}
	}
	return l, nil
}

func (l *dimLists) close() error {
	var errs []error
	for _, stmt := range []*sql.Stmt{l.add, l.touch, l.touchEvents} {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(errs...)
}

// writeDimLists are the lists one Write refers to.
type writeDimLists struct {
	lists *dimLists
	ctx   context.Context
	tx    *sql.Tx
	// added are the lists this Write stored: known to later Writes once it
	// commits. latest is, per list, the latest time of this Write's events
	// that refer to it. Both are made when first needed: many Writes hold
	// one event.
	added  map[string]int64
	latest map[int64]int64
	// lastDims and lastID are the list met last and its id: consecutive
	// events of one resource carry equal lists, which comparing tells
	// sooner than encoding and looking up.
	lastDims []string
	lastID   int64
}

func (l *dimLists) forWrite(ctx context.Context, tx *sql.Tx) *writeDimLists {
	return &writeDimLists{lists: l, ctx: ctx, tx: tx}
}

// id returns the id of the list (not empty), stored if it was not, for an event at timeNs.
func (w *writeDimLists) id(dims []string, enc *jsonEncoder, timeNs int64) (int64, error) {
	if !slices.Equal(dims, w.lastDims) {
		list := enc.list(dims)
		id, ok := w.lists.ids[list]
		if !ok {
			id, ok = w.added[list]
		}
		if !ok {
			if err := w.tx.StmtContext(w.ctx, w.lists.add).QueryRowContext(w.ctx, list, timeNs).Scan(&id); err != nil {
				return 0, fmt.Errorf("sqlitestore: write dimension list: %w", err)
			}
			if w.added == nil {
				w.added = map[string]int64{}
			}
			w.added[list] = id
		}
		w.lastDims, w.lastID = dims, id
	}
	if latest, ok := w.latest[w.lastID]; !ok || timeNs > latest {
		if w.latest == nil {
			w.latest = map[int64]int64{}
		}
		w.latest[w.lastID] = timeNs
	}
	return w.lastID, nil
}

// keepFor raises the last_ns of the list a stored event refers to: an
// event merged without dimensions keeps its list, perhaps at a later time.
func (w *writeDimLists) keepFor(eventID string, timeNs int64) error {
	if _, err := w.tx.StmtContext(w.ctx, w.lists.touchEvents).ExecContext(w.ctx, eventID, timeNs); err != nil {
		return fmt.Errorf("sqlitestore: keep dimension list of %s: %w", eventID, err)
	}
	return nil
}

// touch raises the last_ns of every list the Write referred to.
func (w *writeDimLists) touch() error {
	stmt := w.tx.StmtContext(w.ctx, w.lists.touch)
	for id, timeNs := range w.latest {
		if _, err := stmt.ExecContext(w.ctx, id, timeNs); err != nil {
			return fmt.Errorf("sqlitestore: keep dimension lists: %w", err)
		}
	}
	return nil
}

// committed makes the lists the Write stored known to later Writes.
func (w *writeDimLists) committed() {
	if len(w.lists.ids)+len(w.added) > maxKnownDimLists {
		clear(w.lists.ids)
	}
	maps.Copy(w.lists.ids, w.added)
}
