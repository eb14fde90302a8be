package custody

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/loom-otel/loom/internal/custody/custodytest"
)

var (
	storageID = custodytest.ID
	owner     = component.MustNewID("reqsampling")
)

func open(t *testing.T, host component.Host) *Journal {
	t.Helper()
	j, err := Open(context.Background(), host, storageID, component.KindProcessor, owner, "logs", "reqsampling::storage")
	require.NoError(t, err)
	return j
}

func TestReplayReturnsWhatWasNotReleasedAcrossARestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	j := open(t, custodytest.FileStorage(t, dir))
	seqs, err := j.Keep(ctx, 1, []byte("a"), []byte("b"), []byte("c"))
	require.NoError(t, err)
	require.NoError(t, j.Release(ctx, seqs[0]))
	decided, err := j.Replace(ctx, seqs[2], 2, []byte("C"))
	require.NoError(t, err)
	// What a SIGKILL leaves is what was written: every call above returned.
	require.NoError(t, j.Close(ctx))

	j = open(t, custodytest.FileStorage(t, dir))
	defer func() { require.NoError(t, j.Close(ctx)) }()
	left, err := j.Replay(ctx)
	require.NoError(t, err)
	assert.Equal(t, []Entry{{Seq: seqs[1], Kind: 1, Data: []byte("b")}, {Seq: decided, Kind: 2, Data: []byte("C")}}, left)

	more, err := j.Keep(ctx, 1, []byte("d"))
	require.NoError(t, err)
	assert.Greater(t, more[0], decided, "numbering continues after the replayed entries")
}

func TestOpenNamesTheKeyAndTheFix(t *testing.T) {
	ctx := context.Background()
	_, err := Open(ctx, componenttest.NewNopHost(), storageID, component.KindProcessor, owner, "logs", "reqsampling::storage")
	assert.ErrorContains(t, err, `reqsampling::storage: no extension "file_storage/test": add it to service::extensions`)

	_, err = Open(ctx, custodytest.Host{storageID: notStorage{}}, storageID, component.KindProcessor, owner, "logs", "reqsampling::storage")
	assert.ErrorContains(t, err, `reqsampling::storage: extension "file_storage/test" is not a storage extension`)
}

type notStorage struct {
	component.StartFunc
	component.ShutdownFunc
}
