package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	canalclient "github.com/withlin/canal-go/client"
	pbe "github.com/withlin/canal-go/protocol/entry"
	"google.golang.org/protobuf/proto"

	"github.com/braid-cdc/braid/client"
)

// recorder builds a consumer's Consumed from what it receives, message by
// message: a transaction is complete when the next begins (or, on canal,
// at its end). A seq received again once complete is compared with what
// it was, whole: a difference is a Conflict.
type recorder struct {
	clock func() time.Duration

	mu      sync.Mutex
	c       Consumed
	cur     *Txn // the transaction being received
	again   *Txn // a complete seq being received again, to compare
	entries map[string]bool
	last    uint64 // the highest complete seq
	dups    int    // transactions received again
	lastErr string // the last error its client logged
}

func newRecorder(name string, clock func() time.Duration) *recorder {
	return &recorder{clock: clock, c: Consumed{Name: name, Txns: map[uint64]*Txn{}}}
}

// reconnected keeps the transaction being received as it is, marked
// partial: the server sends it again whole when the client had not acked
// it, and the copy replaces it; but the client may have learned it whole
// and acked it (a native client learns a transaction is whole when the
// next one starts, and a stop may come before the handler sees that
// next one), and then nothing sends it again. Forgetting it lost a seq
// that the stream delivered (seed 915100: stream-dense and
// ledger-exactly-once for the native consumer after a pause).
func (r *recorder) reconnected() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.again != nil {
		r.again.partial = true
	}
	r.finishAgain()
	if r.cur != nil {
		r.cur.partial = true
		r.finish()
	}
	r.entries = nil
}

// add records a message (or canal entry) of transaction seq. entry, when
// not "", names the entry, so that one sent twice counts once.
func (r *recorder) add(seq uint64, snapshot bool, ddl string, rows []string, entry string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.cur
	if _, done := r.c.Txns[seq]; done {
		if r.again == nil || r.again.Seq != seq {
			r.finishAgain()
			r.again = &Txn{Seq: seq, At: r.clock()}
			r.dups++
		}
		t = r.again
	} else if t == nil || t.Seq != seq {
		r.finish()
		r.cur = &Txn{Seq: seq, At: r.clock()}
		r.entries = map[string]bool{}
		t = r.cur
	}
	if entry != "" && t == r.cur {
		if r.entries[entry] {
			return
		}
		r.entries[entry] = true
	}
	t.Snapshot = t.Snapshot || snapshot
	if ddl != "" {
		t.DDL = ddl
	}
	t.Rows = append(t.Rows, rows...)
}

// end marks the transaction seq complete (canal's TRANSACTIONEND).
func (r *recorder) end(seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil && r.cur.Seq == seq {
		r.finish()
	}
}

func (r *recorder) finish() {
	if r.cur == nil {
		return
	}
	r.c.Txns[r.cur.Seq] = r.cur
	r.last = max(r.last, r.cur.Seq)
	r.cur, r.entries = nil, nil
}

// finishAgain compares a complete seq received again with the first time.
// Only a copy received from its first message compares: a re-delivery that
// began inside it (canal, acked in the middle) says nothing.
func (r *recorder) finishAgain() {
	a := r.again
	r.again = nil
	if a == nil {
		return
	}
	first := r.c.Txns[a.Seq]
	if first.partial {
		if len(a.Rows) >= len(first.Rows) {
			a.At = first.At
			r.c.Txns[a.Seq] = a // the whole copy, or one no shorter
		}
		return
	}
	if len(a.Rows) >= len(first.Rows) && !first.Same(a) {
		r.c.Conflicts = append(r.c.Conflicts, Conflict{Seq: a.Seq, At: a.At, First: first.Fingerprint(), Then: a.Fingerprint()})
	}
}

// complete is the highest seq received whole; a transaction still open
// counts when it is seq head (the stream's last one, at the end).
func (r *recorder) complete(head uint64) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil && r.cur.Seq == head {
		r.finish()
	}
	return r.last
}

// consumed returns what was received, the open transaction left out.
func (r *recorder) consumed() Consumed {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finishAgain()
	out := Consumed{Name: r.c.Name, Txns: map[uint64]*Txn{}, Conflicts: append([]Conflict(nil), r.c.Conflicts...), LastError: r.lastErr}
	for k, v := range r.c.Txns {
		out.Txns[k] = v
	}
	return out
}

// received is every row change received so far, the open transaction's
// too, snapshot rows left out.
func (r *recorder) received() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]bool{}
	for _, t := range append(slices.Collect(maps.Values(r.c.Txns)), r.cur) {
		if t == nil || t.Snapshot {
			continue
		}
		for _, row := range t.Rows {
			out[row] = true
		}
	}
	return out
}

// Handle, Enabled, WithAttrs and WithGroup make the recorder the slog
// handler of its consumer's client: it keeps the last error the client
// logged (a stream dropped, a replay refused), for the report, and passes
// every record on.
type errKeeper struct {
	slog.Handler
	rec *recorder
}

func (h errKeeper) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelWarn {
		msg := rec.Message
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				msg += ": " + a.Value.String()
			}
			return true
		})
		h.rec.mu.Lock()
		h.rec.lastErr = msg
		h.rec.mu.Unlock()
	}
	return h.Handler.Handle(ctx, rec)
}

func (h errKeeper) WithAttrs(as []slog.Attr) slog.Handler {
	return errKeeper{h.Handler.WithAttrs(as), h.rec}
}

func (h errKeeper) WithGroup(name string) slog.Handler {
	return errKeeper{h.Handler.WithGroup(name), h.rec}
}

// kindOf is a change's letter for a message's type.
func kindOf(typ string) byte {
	switch typ {
	case "INSERT":
		return 'I'
	case "UPDATE":
		return 'U'
	case "DELETE":
		return 'D'
	}
	return '?'
}

// rowOf is a row change of the writer's from a row's id and v.
func rowOf(kind byte, id, v string) string {
	i, err1 := strconv.ParseInt(id, 10, 64)
	n, err2 := strconv.ParseInt(v, 10, 64)
	if err1 != nil || err2 != nil {
		return fmt.Sprintf("%c %q %q", kind, id, v)
	}
	return change(kind, i, n)
}

// nativeConsumer reads the stream over the native API as its client id,
// through any node, until ctx ends; pause makes it stop reading for a
// while (the server keeps its cursor, and may detach it).
type nativeConsumer struct {
	rec      *recorder
	cl       *client.Client
	clientID string
	pauses   chan time.Duration
}

func newNativeConsumer(urls, user, password, clientID string, rec *recorder, log *slog.Logger, extra ...client.Option) (*nativeConsumer, error) {
	opts := append([]client.Option{client.WithToken(user, password), client.WithBackoff(100*time.Millisecond, time.Second),
		client.WithIdleTimeout(15 * time.Second)}, extra...)
	opts = append(opts, client.WithLogger(slog.New(errKeeper{log.Handler(), rec})))
	cl, err := client.New(urls, opts...)
	if err != nil {
		return nil, err
	}
	return &nativeConsumer{rec: rec, cl: cl, clientID: clientID, pauses: make(chan time.Duration, 4)}, nil
}

func (n *nativeConsumer) handle(m client.Message) error {
	if m.Type == client.TypeEmpty {
		// A transaction of no rows (a snapshot chunk that found none):
		// its seq, as the canal consumer records its TRANSACTIONBEGIN,
		// which nothing marks a snapshot's either.
		n.rec.add(m.Seq, false, "", nil, "")
		return nil
	}
	var rows []string
	ddl := ""
	if m.IsDdl {
		ddl = m.Type
	} else {
		k := kindOf(m.Type)
		for _, d := range m.Data {
			rows = append(rows, rowOf(k, deref(d["id"]), deref(d["v"])))
		}
	}
	n.rec.add(m.Seq, m.Snapshot, ddl, rows, "")
	return nil
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}

// pause stops the consumer reading for d.
func (n *nativeConsumer) pause(d time.Duration) {
	select {
	case n.pauses <- d:
	default:
	}
}

// run streams until ctx ends, starting again after each pause or error.
func (n *nativeConsumer) run(ctx context.Context) {
	for ctx.Err() == nil {
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		n.rec.reconnected()
		go func() { done <- n.cl.Stream(sctx, dest, n.clientID, n.handle) }()
		var wait time.Duration
		select {
		case wait = <-n.pauses:
			cancel()
			<-done
		case <-done:
			cancel()
			wait = time.Second
		case <-ctx.Done():
			cancel()
			<-done
			return
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
	}
}

// canalConsumer reads the stream over the canal protocol as its client
// id, connecting to each node's canal port in turn when one fails. It acks
// a batch only once a transaction ends in it, so that what a new
// connection sends again begins at a transaction.
type canalConsumer struct {
	rec      *recorder
	ports    []int
	user     string
	password string
	clientID int
	log      *slog.Logger
}

func (c *canalConsumer) run(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		err := c.session(ctx, c.ports[i%len(c.ports)])
		if ctx.Err() != nil {
			return
		}
		c.log.Info("canal consumer reconnects", "port", c.ports[i%len(c.ports)], "err", err)
		c.rec.mu.Lock()
		c.rec.lastErr = fmt.Sprint(err)
		c.rec.mu.Unlock()
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// session is one connection: it reads until an error or ctx ends.
func (c *canalConsumer) session(ctx context.Context, port int) (err error) {
	// canal-go reads with no deadline, so a stopped node would hold the
	// session for ever, and its connector is not safe to close from
	// another goroutine. The session therefore goes through a relay of
	// its own, which a watchdog cuts when a call takes too long.
	relay, err := newProxy("canal session", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	relayCtx, cutRelay := context.WithCancel(ctx)
	relayDone := make(chan struct{})
	go func() {
		defer close(relayDone)
		relay.run(relayCtx)
	}()
	defer func() {
		cutRelay()
		<-relayDone
	}()
	_, relayPort, _ := net.SplitHostPort(relay.Addr())
	relayPortN, _ := strconv.Atoi(relayPort)
	conn := canalclient.NewSimpleCanalConnector("127.0.0.1", relayPortN, c.user, c.password, dest, 30000, 30000)
	conn.ClientIdentity.ClientId = c.clientID
	defer func() {
		if r := recover(); r != nil { // canal-go panics on an error answer
			err = fmt.Errorf("canal-go: %v", r)
		}
	}()
	var lastCall sync.Mutex
	callStart := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				cutRelay()
				return
			case <-t.C:
				lastCall.Lock()
				stuck := time.Since(callStart) > 20*time.Second
				lastCall.Unlock()
				if stuck {
					cutRelay()
					return
				}
			}
		}
	}()
	call := func() {
		lastCall.Lock()
		callStart = time.Now()
		lastCall.Unlock()
	}
	call()
	if err := conn.Connect(); err != nil {
		return err
	}
	defer conn.DisConnection()
	call()
	if err := conn.Subscribe(`.*\..*`); err != nil {
		return err
	}
	c.rec.reconnected()
	var unacked []int64
	waitMs, unit := int64(500), int32(2)
	for ctx.Err() == nil {
		call()
		msg, err := conn.GetWithOutAck(1000, &waitMs, &unit)
		if err != nil {
			return err
		}
		if msg == nil {
			return fmt.Errorf("connection closed")
		}
		if msg.Id == -1 || len(msg.Entries) == 0 {
			continue
		}
		atEnd := false
		for i := range msg.Entries {
			atEnd = c.entry(&msg.Entries[i])
		}
		unacked = append(unacked, msg.Id)
		if atEnd {
			for _, id := range unacked {
				call()
				if err := conn.Ack(id); err != nil {
					return err
				}
			}
			unacked = unacked[:0]
		}
	}
	return nil
}

// entry records one canal entry, and says whether it ends a transaction.
func (c *canalConsumer) entry(e *pbe.Entry) bool {
	props := map[string]string{}
	for _, p := range e.GetHeader().GetProps() {
		props[p.GetKey()] = p.GetValue()
	}
	seq, err := strconv.ParseUint(props["seq"], 10, 64)
	if err != nil {
		return false // no seq: not a transaction's entry
	}
	id := fmt.Sprintf("%s:%d:%v", e.GetHeader().GetLogfileName(), e.GetHeader().GetLogfileOffset(), e.GetEntryType())
	switch e.GetEntryType() {
	case pbe.EntryType_TRANSACTIONBEGIN:
		c.rec.add(seq, false, "", nil, id)
		return false
	case pbe.EntryType_TRANSACTIONEND:
		c.rec.end(seq)
		return true
	case pbe.EntryType_ROWDATA:
	default:
		return false
	}
	rc := new(pbe.RowChange)
	if err := proto.Unmarshal(e.GetStoreValue(), rc); err != nil {
		c.rec.add(seq, false, "", []string{"undecodable entry: " + err.Error()}, id)
		return false
	}
	for _, p := range rc.GetProps() {
		props[p.GetKey()] = p.GetValue()
	}
	snapshot := props["isSnapshot"] == "true"
	if rc.GetIsDdl() {
		c.rec.add(seq, snapshot, rc.GetEventType().String(), nil, id)
		c.rec.end(seq)
		return true
	}
	k := kindOf(rc.GetEventType().String())
	var rows []string
	for _, rd := range rc.GetRowDatas() {
		cols := rd.GetAfterColumns()
		if k == 'D' {
			cols = rd.GetBeforeColumns()
		}
		var idv, v string
		for _, col := range cols {
			switch col.GetName() {
			case "id":
				idv = col.GetValue()
			case "v":
				v = col.GetValue()
			}
		}
		rows = append(rows, rowOf(k, idv, v))
	}
	if len(rows) > 0 {
		id += ":" + rows[0]
	}
	c.rec.add(seq, snapshot, "", rows, id)
	return false
}
