package reqsamplingprocessor

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	pdatarequest "go.opentelemetry.io/collector/pdata/xpdata/request"
)

// compact replaces a batch's records by their encoding while it waits for
// its decisions: decoded records take several times the bytes of their
// encoding, and the garbage collector scans every pointer in them on each
// cycle while they wait. data is the encoding when the journal made it
// already. A batch that cannot be encoded waits as it is.
func (b *batch) compact(data []byte) {
	if data == nil {
		var err error
		if data, err = marshal(b); err != nil {
			return
		}
	}
	b.encoded = data
	b.logs, b.traces = plog.Logs{}, ptrace.Traces{}
}

// decoded returns the batch's records: its own, or a decoding of its
// compacted records that the caller owns.
func (b *batch) decoded() (plog.Logs, ptrace.Traces, error) {
	if b.encoded == nil {
		return b.logs, b.traces, nil
	}
	if b.signal == signalLogs {
		_, ld, err := pdatarequest.UnmarshalLogs(b.encoded)
		return ld, ptrace.Traces{}, err
	}
	_, td, err := pdatarequest.UnmarshalTraces(b.encoded)
	return plog.Logs{}, td, err
}

// expand decodes a compacted batch's records back into it.
func (b *batch) expand() error {
	ld, td, err := b.decoded()
	if err != nil {
		return fmt.Errorf("decoding the records that waited compacted: %w", err)
	}
	b.logs, b.traces, b.encoded = ld, td, nil
	return nil
}
