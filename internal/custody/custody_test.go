package custody

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
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
	a, b, c := Entry{Seq: j.Next(1), Data: []byte("a")}, Entry{Seq: j.Next(1), Data: []byte("b")}, Entry{Seq: j.Next(1), Data: []byte("c")}
	require.NoError(t, j.Keep(ctx, a, b, c))
	require.NoError(t, j.Release(ctx, a.Seq))
	decided := Entry{Seq: j.Next(2), Data: []byte("C")}
	require.NoError(t, j.Replace(ctx, []Seq{c.Seq}, decided))
	// What a SIGKILL leaves is what was written: every call above returned.
	require.NoError(t, j.Close(ctx))

	j = open(t, custodytest.FileStorage(t, dir))
	defer func() { require.NoError(t, j.Close(ctx)) }()
	left, err := j.Replay(ctx)
	require.NoError(t, err)
	assert.Equal(t, []Entry{b, decided}, left)
	assert.Equal(t, Kind(2), left[1].Seq.Kind(), "an entry keeps the kind it was numbered for")
	assert.Greater(t, j.Next(1), decided.Seq, "numbering continues after the replayed entries")
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

func TestClientKeyTellsClientsApart(t *testing.T) {
	with := func(md map[string][]string) context.Context {
		return client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(md)})
	}
	assert.Empty(t, ClientKey(context.Background()))
	assert.Equal(t, ClientKey(with(map[string][]string{"x-tenant": {"a"}, "b": {"1"}})), ClientKey(with(map[string][]string{"b": {"1"}, "x-tenant": {"a"}})))
	assert.NotEqual(t, ClientKey(with(map[string][]string{"x-tenant": {"a"}})), ClientKey(with(map[string][]string{"x-tenant": {"b"}})))
	assert.NotEqual(t, ClientKey(with(map[string][]string{"x-tenant": {"a;b"}})), ClientKey(with(map[string][]string{"x-tenant": {"a", "b"}})))
}
