package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	canalclient "github.com/withlin/canal-go/client"
	pbe "github.com/withlin/canal-go/protocol/entry"
	"google.golang.org/protobuf/proto"

	"github.com/braid-cdc/braid/api/canal"
	"github.com/braid-cdc/braid/api/native"
	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/stream"
)

// ConsumeDest is the name the consumer benchmark serves its store under.
const ConsumeDest = "bench-consume"

// Consumer batch sizes and waits, as a canal consumer is usually written:
// GetWithOutAck of up to ConsumeCanalBatch entries waiting up to
// ConsumeCanalWait, then Ack.
const (
	ConsumeCanalBatch = 1000
	ConsumeCanalWait  = 100 * time.Millisecond
)

// FillResult is what FillStore put into the store.
type FillResult struct {
	// Rows counts the row changes of the EventRows in the store.
	Rows int
	// Events and Bytes are the store's use once filled (stream.Stats).
	Events int
	Bytes  int64
	// Took is the wall time from starting the destination to the commit
	// of the last row change.
	Took time.Duration
}

// FillStore runs the configurations' binlogs as the sources of one
// destination (as MergeBraid: strict order from `earliest`, the first
// configuration's table filter, heartbeat MergeHeartbeat) into store until
// want row changes and the commit of the transaction holding the last one
// are in it, then stops the destination.
//
// It watches the store as client id anchor, which it subscribes first and
// never acks: as long as anchor stays subscribed the store drops nothing,
// so a client id subscribed later still starts at the first event. The
// store must be large enough to hold everything; Put waits otherwise, and
// FillStore with it until ctx ends.
func FillStore(ctx context.Context, cfgs []DecodeConfig, store *stream.Store, anchor string, want int) (FillResult, error) {
	spec, err := mergeSpec(cfgs)
	if err != nil {
		return FillResult{}, err
	}
	d, err := group.New(group.Config{Spec: spec})
	if err != nil {
		return FillResult{}, fmt.Errorf("bench: fill: %w", err)
	}

	store.Subscribe(anchor)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	began := time.Now()
	runDone := make(chan error, 1)
	go func() {
		runDone <- d.RunInto(runCtx, store)
		cancel() // a failed destination ends the watch below
	}()
	res := FillResult{}
	filled := false
	for !filled {
		b, gerr := store.Get(runCtx, anchor, 4096, 100*time.Millisecond)
		if gerr != nil {
			break // canceled: the destination's error or ctx's says why
		}
		for _, ev := range b.Events {
			switch ev.Type {
			case change.EventRows:
				res.Rows += len(ev.Rows)
			case change.EventCommit, change.EventDDL:
				filled = filled || res.Rows >= want
			}
		}
	}
	res.Took = time.Since(began)
	cancel()
	err = <-runDone
	// The anchor's batches are handed out, never acked: take them back, so
	// that the store keeps no list of them.
	_ = store.Rollback(anchor)
	st := store.Stats()
	res.Events, res.Bytes = st.Events, st.Bytes
	switch {
	case filled && (err == nil || errors.Is(err, context.Canceled)):
		if res.Rows != want {
			return res, fmt.Errorf("bench: fill: the store holds %d row changes, want %d", res.Rows, want)
		}
		return res, nil
	case err != nil && !errors.Is(err, context.Canceled):
		return res, fmt.Errorf("bench: fill: destination: %w", err)
	}
	return res, fmt.Errorf("bench: fill: %d of %d row changes in the store (%d events, %.1f MiB): %w",
		res.Rows, want, st.Events, mib(uint64(st.Bytes)), context.Cause(ctx))
}

// ConsumeResult is what one consumer run measured.
type ConsumeResult struct {
	// Rows counts the row changes delivered; Elapsed is the wall time from
	// connecting to the last of them; FirstRow the time to the first.
	Result
	// Bytes counts what the server wrote on the consumer's connections.
	Bytes int64
	// ServerCPU is the CPU time the serving process used while the
	// consumer ran, ClientCPU the consumer process's own.
	ServerCPU, ClientCPU time.Duration
}

// MBPerSec is Bytes over Elapsed, in MB (10^6 bytes) per second.
func (r ConsumeResult) MBPerSec() float64 { return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds() }

// consumeIDs numbers the consumers of a process: each run is a new client
// id, which starts at the store's first event (the anchor keeps it there).
var consumeIDs int

// errConsumed stops a consumer that has every row it wanted.
var errConsumed = errors.New("bench: every row change consumed")

// ConsumeCanal serves reg's destination dest with an api/canal Server on a
// loopback port and reads it, in a process of its own, with one canal-go
// SimpleCanalConnector, client id clientID (canal's client ids are
// numbers; the store's client id is its decimal form), until want row
// changes (the RowDatas of ROWDATA entries) have arrived: GetWithOutAck of
// ConsumeCanalBatch entries waiting up to ConsumeCanalWait, each ROWDATA
// entry's RowChange decoded, then Ack. More than want fails it.
func ConsumeCanal(ctx context.Context, reg *stream.Registry, dest string, clientID, want int) (ConsumeResult, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ConsumeResult{}, fmt.Errorf("bench: canal consumer: %w", err)
	}
	cl := &countingListener{Listener: l}
	srvCtx, stop := context.WithCancel(ctx)
	serveDone := make(chan error, 1)
	go func() { serveDone <- canal.NewServer(canal.Config{Registry: reg}).Serve(srvCtx, cl) }()
	res, err := consumeInChild(ctx, childJob{Kind: "canal", Addr: l.Addr().String(), Dest: dest, Client: strconv.Itoa(clientID), Want: want})
	stop()
	if serr := <-serveDone; err == nil && serr != nil {
		err = fmt.Errorf("bench: canal server: %w", serr)
	}
	res.Bytes = cl.written.Load()
	return res, err
}

func consumeCanal(ctx context.Context, addr string, dest string, clientID, want int) (res ConsumeResult, err error) {
	began := time.Now()
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return res, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return res, err
	}
	c := canalclient.NewSimpleCanalConnector(host, port, "", "", dest, 60000, 60000)
	c.ClientIdentity.ClientId = clientID
	// canal-go panics on an error answer to a GET; make it an error.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bench: canal consumer %d: canal-go panicked: %v", clientID, r)
		}
	}()
	if err := c.Connect(); err != nil {
		return res, fmt.Errorf("bench: canal consumer %d: connect: %w", clientID, err)
	}
	defer c.DisConnection()
	if err := c.Subscribe(`.*\..*`); err != nil {
		return res, fmt.Errorf("bench: canal consumer %d: subscribe: %w", clientID, err)
	}
	wait, unit := ConsumeCanalWait.Milliseconds(), int32(2) // TimeUnit.MILLISECONDS
	var rc pbe.RowChange
	for res.Rows < want {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("bench: canal consumer %d: %d of %d row changes: %w", clientID, res.Rows, want, err)
		}
		m, err := c.GetWithOutAck(ConsumeCanalBatch, &wait, &unit)
		if err != nil {
			return res, fmt.Errorf("bench: canal consumer %d: get: %w", clientID, err)
		}
		if m.Id == -1 {
			continue
		}
		for i := range m.Entries {
			e := &m.Entries[i]
			if e.GetEntryType() != pbe.EntryType_ROWDATA {
				continue
			}
			if err := proto.Unmarshal(e.StoreValue, &rc); err != nil {
				return res, fmt.Errorf("bench: canal consumer %d: batch %d: RowChange: %w", clientID, m.Id, err)
			}
			if res.Rows == 0 && len(rc.RowDatas) > 0 {
				res.FirstRow = time.Since(began)
			}
			res.Rows += len(rc.RowDatas)
		}
		if err := c.Ack(m.Id); err != nil {
			return res, fmt.Errorf("bench: canal consumer %d: ack of batch %d: %w", clientID, m.Id, err)
		}
	}
	res.Elapsed = time.Since(began)
	if res.Rows != want {
		return res, fmt.Errorf("bench: canal consumer %d: %d row changes, want %d", clientID, res.Rows, want)
	}
	return res, nil
}

// ConsumeNative serves reg with native.NewHandler on a loopback port and
// reads destination dest, in a process of its own, with the Go client's
// StreamViews as clientID, reading every value of every row, until want
// row changes (the rows of the messages' data) have arrived. The stream
// comes in braid's binary encoding, the Go client's default, or as JSON
// lines when jsonLines is set. More than want fails it.
func ConsumeNative(ctx context.Context, reg *stream.Registry, dest, clientID string, want int, jsonLines bool) (ConsumeResult, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ConsumeResult{}, fmt.Errorf("bench: native consumer: %w", err)
	}
	cl := &countingListener{Listener: l}
	srv := native.NewServer(native.NewHandler(reg, nil))
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(cl) }) // http.ErrServerClosed once closed
	kind := "native"
	if jsonLines {
		kind = "native-json"
	}
	res, err := consumeInChild(ctx, childJob{Kind: kind, Addr: l.Addr().String(), Dest: dest, Client: clientID, Want: want})
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	if serr := srv.Shutdown(sctx); serr != nil {
		srv.Close()
	}
	cancel()
	wg.Wait()
	res.Bytes = cl.written.Load()
	return res, err
}

func consumeNative(ctx context.Context, hc *http.Client, url, dest, clientID string, want int, jsonLines bool) (ConsumeResult, error) {
	var res ConsumeResult
	opts := []client.Option{client.WithHTTPClient(hc)}
	if jsonLines {
		opts = append(opts, client.WithJSONLines())
	}
	c, err := client.New(url, opts...)
	if err != nil {
		return res, fmt.Errorf("bench: native consumer %s: %w", clientID, err)
	}
	began := time.Now()
	valueBytes := 0
	err = c.StreamViews(ctx, dest, clientID, func(m *client.MessageView) error {
		if m.Rows() == 0 || m.IsDdl {
			return nil
		}
		if res.Rows == 0 {
			res.FirstRow = time.Since(began)
		}
		// Read every value, as a consumer that applies the rows does.
		for r := range m.Rows() {
			for c := range m.Columns() {
				v, _ := m.Value(r, c)
				valueBytes += len(v)
			}
		}
		res.Rows += m.Rows()
		if res.Rows >= want {
			res.Elapsed = time.Since(began)
			return errConsumed
		}
		return nil
	})
	switch {
	case errors.Is(err, errConsumed):
		if res.Rows != want {
			return res, fmt.Errorf("bench: native consumer %s: %d row changes, want %d", clientID, res.Rows, want)
		}
		if valueBytes == 0 {
			return res, fmt.Errorf("bench: native consumer %s: %d row changes without a value", clientID, res.Rows)
		}
		return res, nil
	case err != nil:
		return res, fmt.Errorf("bench: native consumer %s: %d of %d row changes: %w", clientID, res.Rows, want, err)
	}
	// Stream returns nil only when ctx ends.
	return res, fmt.Errorf("bench: native consumer %s: %d of %d row changes: %w", clientID, res.Rows, want, context.Cause(ctx))
}

// countingListener counts the bytes written on the connections it
// accepts: what a server sent its consumers.
type countingListener struct {
	net.Listener
	written atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, written: &l.written}, nil
}

type countingConn struct {
	net.Conn
	written *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written.Add(int64(n))
	return n, err
}
