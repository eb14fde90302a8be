package reqsamplingprocessor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.uber.org/zap"

	"github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/learner"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/policy"
)

// SharePath is where a gateway receives what its peers learned.
const SharePath = "/reqsampling/v1/learned"

// shareOutbox bounds what is kept for the peers between two pushes: a
// value_drift policy's blocks, and apart the places whose recent records
// are pushed; input hashes.
type shareOutbox struct{ blocks, hashes int }

// sharedOutbox holds a second of a busy gateway's learning: at 10k records/s
// over 100 places, some 80 blocks and 100 places' recent records; at 10k
// requests/s, 10k input hashes.
var sharedOutbox = shareOutbox{blocks: 1024, hashes: 16384}

// shareMessage is one push: entries of what the sender learned since its
// last push.
type shareMessage struct {
	// From identifies the sender's instance: a gateway ignores its own pushes
	// (a DNS name resolves to every gateway, itself included).
	From    string       `json:"from"`
	Entries []shareEntry `json:"entries"`
}

// shareEntry is one value_drift policy's block or recent records of a
// place, or one input_hash's counts.
type shareEntry struct {
	Policy string              `json:"policy,omitempty"`
	Block  *failure.DriftBlock `json:"block,omitempty"`
	Recent *failure.DriftBlock `json:"recent,omitempty"`
	Input  *learner.InputDelta `json:"input,omitempty"`
}

var errEntry = errors.New("an entry is a value_drift policy's block or recent records, or an input's counts")

// sharer exchanges what the failure model learns with the peer gateways:
// every share::interval it pushes what this gateway learned since the last
// push to every peer, and it merges what peers push to it as if it had
// learned it itself. What is shared: value_drift's baseline blocks and the
// counts of its recent records by place, and hot_input's counts by
// input_hash; latency is learned alone.
type sharer struct {
	s      *sampler
	cfg    *ShareConfig
	self   string
	drifts map[string]*failure.Drift // by policy name

	client *http.Client
	server *http.Server
	addr   net.Addr
	peers  []string // static peers' URLs
	stop   chan struct{}
	done   sync.WaitGroup
}

func newSharer(s *sampler, policies []compiledPolicy) *sharer {
	var id [8]byte
	_, _ = rand.Read(id[:])
	sh := &sharer{s: s, cfg: &s.cfg.Share, self: hex.EncodeToString(id[:]), drifts: map[string]*failure.Drift{},
		stop: make(chan struct{})}
	for _, p := range policies {
		if vd, ok := p.eval.(*policy.ValueDrift); ok {
			sh.drifts[p.name] = vd.Drift()
		}
	}
	for _, p := range sh.cfg.Peers {
		sh.peers = append(sh.peers, endpointURL(p))
	}
	return sh
}

// endpointURL is the share endpoint of a peer's base URL.
func endpointURL(base string) string {
	u, _ := url.Parse(base) // checked by Validate
	u.Path = SharePath
	return u.String()
}

// start serves the peers' pushes and pushes to the peers, as configured.
func (sh *sharer) start(ctx context.Context, host component.Host) error {
	if sh.cfg.Server.NetAddr.Endpoint != "" {
		ln, err := sh.cfg.Server.ToListener(ctx)
		if err != nil {
			return fmt.Errorf("share::server: %w", err)
		}
		sh.server, err = sh.cfg.Server.ToServer(ctx, host.GetExtensions(), sh.s.set, http.HandlerFunc(sh.serveHTTP))
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("share::server: %w", err)
		}
		sh.addr = ln.Addr()
		sh.done.Go(func() {
			if err := sh.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
			}
		})
	}
	if !sh.cfg.pushes() {
		return nil
	}
	var err error
	if sh.client, err = sh.cfg.Client.ToClient(ctx, host.GetExtensions(), sh.s.set); err != nil {
		return fmt.Errorf("share::client: %w", err)
	}
	sh.done.Go(sh.run)
	return nil
}

func (sh *sharer) shutdown(ctx context.Context) error {
	close(sh.stop)
	var err error
	if sh.server != nil {
		err = sh.server.Shutdown(ctx)
	}
	sh.done.Wait()
	return err
}

// run pushes every interval, or when a test says.
func (sh *sharer) run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-sh.stop
		cancel()
	}()
	var ticks <-chan time.Time
	if sh.s.testPushes == nil {
		ticker := time.NewTicker(sh.cfg.Interval)
		defer ticker.Stop()
		ticks = ticker.C
	}
	for {
		select {
		case <-ticks:
			sh.push(ctx)
		case ack := <-sh.s.testPushes:
			sh.push(ctx)
			close(ack)
		case <-sh.stop:
			return
		}
	}
}

// push sends what was learned since the last push to every peer at once.
// A peer that does not take it loses it: what it learns is the poorer, and
// the push is counted as failed.
func (sh *sharer) push(ctx context.Context) {
	msgs := sh.outgoing()
	if len(msgs) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, peer := range sh.resolvePeers(ctx) {
		wg.Go(func() {
			for _, m := range msgs {
				sh.send(ctx, peer, m)
			}
		})
	}
	wg.Wait()
}

func (sh *sharer) send(ctx context.Context, peer string, msg []byte) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, peer, bytes.NewReader(msg))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
		var resp *http.Response
		if resp, err = sh.client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				err = fmt.Errorf("HTTP status %s", resp.Status)
			}
		}
	}
	sh.s.tel.pushed(err == nil, len(msg))
	if err != nil {
		sh.s.logger.Debug("A peer did not take what this gateway learned", zap.String("peer", peer), zap.Error(err))
	}
}

// resolvePeers is the static peers and every address share::dns resolves to.
func (sh *sharer) resolvePeers(ctx context.Context) []string {
	if sh.cfg.DNS == "" {
		return sh.peers
	}
	u, _ := url.Parse(sh.cfg.DNS) // checked by Validate
	addrs, err := net.DefaultResolver.LookupHost(ctx, u.Hostname())
	if err != nil {
		sh.s.logger.Debug("The peers' DNS name did not resolve", zap.String("dns", sh.cfg.DNS), zap.Error(err))
	}
	peers := slices.Clone(sh.peers)
	for _, a := range addrs {
		peers = append(peers, (&url.URL{Scheme: u.Scheme, Host: net.JoinHostPort(a, u.Port()), Path: SharePath}).String())
	}
	return peers
}

// outgoing takes what was learned since it was last called and encodes it
// in messages of at most share::max_bytes.
func (sh *sharer) outgoing() [][]byte {
	var entries [][]byte
	dropped := 0
	add := func(e shareEntry) {
		b, err := json.Marshal(e)
		if err != nil || len(b) > sh.cfg.MaxBytes-len(sh.self)-64 {
			dropped++
			return
		}
		entries = append(entries, b)
	}
	for name, d := range sh.drifts {
		blocks, n := d.TakeBlocks()
		dropped += n
		for i := range blocks {
			add(shareEntry{Policy: name, Block: &blocks[i]})
		}
		recent, n := d.TakeRecent()
		dropped += n
		for i := range recent {
			add(shareEntry{Policy: name, Recent: &recent[i]})
		}
	}
	sh.s.mu.Lock()
	deltas, n := sh.s.learner.TakeDeltas()
	sh.s.mu.Unlock()
	dropped += n
	for i := range deltas {
		add(shareEntry{Input: &deltas[i]})
	}
	sh.s.tel.shareDropped(dropped)
	return sh.pack(entries)
}

// pack joins encoded entries into messages of at most share::max_bytes.
func (sh *sharer) pack(entries [][]byte) [][]byte {
	head := `{"from":"` + sh.self + `","entries":[`
	var msgs [][]byte
	var cur []byte
	for _, e := range entries {
		if cur != nil && len(cur)+len(e)+3 > sh.cfg.MaxBytes {
			msgs = append(msgs, append(cur, "]}"...))
			cur = nil
		}
		if cur == nil {
			cur = append(make([]byte, 0, min(sh.cfg.MaxBytes, 64<<10)), head...)
		} else {
			cur = append(cur, ',')
		}
		cur = append(cur, e...)
	}
	if cur != nil {
		msgs = append(msgs, append(cur, "]}"...))
	}
	return msgs
}

// serveHTTP takes a peer's push.
func (sh *sharer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != SharePath {
		http.Error(w, "POST learned state to "+SharePath, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(sh.cfg.MaxBytes)))
	if err != nil {
		sh.s.tel.shareReceived(0, 1)
		http.Error(w, fmt.Sprintf("a push is at most %d bytes (share::max_bytes)", sh.cfg.MaxBytes), http.StatusRequestEntityTooLarge)
		return
	}
	if err := sh.receive(body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// receive merges a peer's message; entries that are not what a peer
// learns are rejected and counted, and the others merged.
func (sh *sharer) receive(body []byte) error {
	var m shareMessage
	if err := json.Unmarshal(body, &m); err != nil {
		sh.s.tel.shareReceived(0, 1)
		return fmt.Errorf("not a push of learned state: %w", err)
	}
	if m.From == sh.self {
		return nil
	}
	var accepted, rejected int
	var firstErr error
	count := func(err error) {
		if err == nil {
			accepted++
			return
		}
		rejected++
		firstErr = cmpOr(firstErr, err)
	}
	var inputs []*learner.InputDelta
	for _, e := range m.Entries {
		switch d := sh.drifts[e.Policy]; {
		case e.Block != nil && e.Recent == nil && e.Input == nil && d != nil:
			count(d.MergeBlock(e.Block))
		case e.Recent != nil && e.Block == nil && e.Input == nil && d != nil:
			count(d.MergeRecent(e.Recent))
		case e.Input != nil && e.Block == nil && e.Recent == nil && e.Policy == "":
			inputs = append(inputs, e.Input)
		default:
			count(fmt.Errorf("%w (policy %q)", errEntry, e.Policy))
		}
	}
	if len(inputs) > 0 {
		now := sh.s.now()
		sh.s.mu.Lock()
		for _, in := range inputs {
			count(sh.s.learner.Merge(*in, now))
		}
		sh.s.mu.Unlock()
	}
	sh.s.tel.shareReceived(accepted, rejected)
	if firstErr != nil {
		return fmt.Errorf("%d of %d entries rejected, the first: %w", rejected, len(m.Entries), firstErr)
	}
	return nil
}
