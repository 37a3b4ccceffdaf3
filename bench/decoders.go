package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-mysql-org/go-mysql/canal"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/spec"
)

// canalServerID is the replica server_id the canal decoder presents. braid's
// is derived from the destination "bench" and source "a"; both differ from
// the server's own id, and from each other, so neither connection kicks the
// other off.
const canalServerID = 4242

// errReachedEnd stops a decoder at the end position.
var errReachedEnd = errors.New("bench: reached the end position")

// DecodeConfig says what a decoder reads.
type DecodeConfig struct {
	// Addr is the server's host:port; User logs in without a password.
	Addr, User string
	// Flavor is "mariadb" or "mysql", as go-mysql spells it (canal needs it
	// told; braid asks the server).
	Flavor string
	// Start is the binlog's first position. braid starts from `earliest`,
	// which is the same place; canal is given Start.
	Start change.Position
	// End is where reading stops: the first transaction boundary at or
	// after it ends the run.
	End change.Position
	// Tables are the table regexes on "schema.table" (whole-name matches).
	Tables []string
	// Want, when set, also stops canal at the first transaction end
	// after Want selected row changes: canal reports the position of a
	// transaction inside a TRANSACTION_PAYLOAD (binlog_transaction_compression)
	// as offset 0, the log_pos MySQL writes in the payload's events, so
	// End alone never stops it on a compressed binlog.
	Want int
}

// Result is what one decoder run measured.
type Result struct {
	// Rows counts the selected row changes delivered; an UPDATE counts once.
	Rows int
	// Elapsed is the wall time from starting the decoder (binlog.Reader.Run,
	// canal.NewCanal) to reaching End.
	Elapsed time.Duration
	// FirstRow is the wall time from starting the decoder to its first row
	// change: connecting, reading schemas and whatever else it does before
	// streaming.
	FirstRow time.Duration
	// PeakHeap is the highest Go heap in use while the decoder ran, in
	// bytes; PeakLive the highest live heap (what the last GC kept: the
	// memory the decoder held, without garbage).
	PeakHeap, PeakLive uint64
	// CPU is the CPU time (user and system) this process used while the
	// decoder ran, where the benchmark measures it (BenchmarkMerge).
	CPU time.Duration
}

// RowsPerSec is Rows over Elapsed.
func (r Result) RowsPerSec() float64 { return float64(r.Rows) / r.Elapsed.Seconds() }

// DecodeBraid reads the binlog with braid's binlog.Reader.
func DecodeBraid(ctx context.Context, cfg DecodeConfig) (Result, error) {
	return sampled(ctx, cfg, decodeBraid)
}

// DecodeCanal reads the binlog with go-mysql's canal package, configured as
// its README shows (canal.NewDefaultConfig), without mysqldump and with a
// fixed server_id.
func DecodeCanal(ctx context.Context, cfg DecodeConfig) (Result, error) {
	return sampled(ctx, cfg, decodeCanal)
}

// sampled runs decode under a heap sampler and sets the result's PeakHeap.
func sampled(ctx context.Context, cfg DecodeConfig, decode func(context.Context, DecodeConfig) (Result, error)) (Result, error) {
	heap := startHeapSampler()
	res, err := decode(ctx, cfg)
	res.PeakHeap = heap.Stop()
	res.PeakLive = heap.Live()
	return res, err
}

// decodeBraid is DecodeBraid without the heap sampler, which samples the
// whole process; several may run at once under one sampler.
func decodeBraid(ctx context.Context, cfg DecodeConfig) (Result, error) {
	filter, err := spec.CompileTableFilter(cfg.Tables)
	if err != nil {
		return Result{}, err
	}
	p, err := binlog.NewReader(binlog.Config{
		Destination: "bench",
		Source: spec.Source{
			Name: "a", Address: cfg.Addr, User: cfg.User,
			Start: spec.Start{Kind: spec.StartEarliest},
		},
		Tables: filter,
	})
	if err != nil {
		return Result{}, err
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		res     Result
		reached bool
		began   time.Time
	)
	emit := func(ev *change.Event) error {
		if reached {
			return errReachedEnd // the parser is stopping; ignore what follows
		}
		var end change.Position
		switch ev.Type {
		case change.EventRows:
			if res.Rows == 0 {
				res.FirstRow = time.Since(began)
			}
			res.Rows += len(ev.Rows)
			return nil
		case change.EventCommit:
			end = ev.Pos
		case change.EventProgress, change.EventDDL:
			end = ev.EndPos
		default:
			return nil
		}
		if end.Compare(cfg.End) >= 0 {
			reached = true
			cancel()
		}
		return nil
	}

	began = time.Now()
	err = p.Run(runCtx, emit)
	res.Elapsed = time.Since(began)
	switch {
	case err != nil:
		return res, fmt.Errorf("bench: braid: %w", err)
	case !reached:
		return res, fmt.Errorf("bench: braid: stopped before %s: %w", cfg.End, context.Cause(ctx))
	}
	return res, nil
}

// decodeCanal is DecodeCanal without the heap sampler; see decodeBraid.
func decodeCanal(ctx context.Context, cfg DecodeConfig) (Result, error) {
	ccfg := canal.NewDefaultConfig()
	ccfg.Addr = cfg.Addr
	ccfg.User = cfg.User
	ccfg.Password = ""
	ccfg.Flavor = cfg.Flavor
	ccfg.ServerID = canalServerID
	ccfg.Dump.ExecutionPath = "" // binlog only
	ccfg.Logger = slog.New(slog.DiscardHandler)
	// canal's regexes match anywhere in "schema.table"; anchor them as
	// braid's are.
	for _, re := range cfg.Tables {
		ccfg.IncludeTableRegex = append(ccfg.IncludeTableRegex, `^(?:`+re+`)$`)
	}

	began := time.Now()
	c, err := canal.NewCanal(ccfg)
	if err != nil {
		return Result{}, fmt.Errorf("bench: canal: %w", err)
	}
	h := &canalCounter{end: cfg.End, want: cfg.Want, began: began}
	c.SetEventHandler(h)
	// canal.Run has no context: Close, from any goroutine, is how it stops.
	stopWatch := context.AfterFunc(ctx, c.Close)
	err = c.RunFrom(mysql.Position{Name: cfg.Start.File, Pos: cfg.Start.Pos})
	res := Result{Rows: h.rows, Elapsed: time.Since(began), FirstRow: h.firstRow}
	stopWatch()
	c.Close()
	switch {
	case errors.Is(err, errReachedEnd):
		return res, nil
	case err != nil:
		return res, fmt.Errorf("bench: canal: %w", err)
	}
	return res, fmt.Errorf("bench: canal: stopped before %s: %w", cfg.End, context.Cause(ctx))
}

// canalCounter counts canal's row changes and stops it at the end position
// by failing OnPosSynced, which canal calls on its Run goroutine after each
// transaction's XID event.
type canalCounter struct {
	canal.DummyEventHandler
	end      change.Position
	want     int
	began    time.Time
	firstRow time.Duration
	rows     int
}

func (h *canalCounter) OnRow(e *canal.RowsEvent) error {
	n := len(e.Rows)
	if e.Action == canal.UpdateAction {
		n /= 2 // before and after image of each row
	}
	if h.rows == 0 {
		h.firstRow = time.Since(h.began)
	}
	h.rows += n
	return nil
}

func (h *canalCounter) OnPosSynced(hdr *replication.EventHeader, pos mysql.Position, _ mysql.GTIDSet, _ bool) error {
	if hdr == nil {
		return nil // Close reporting the last position, maybe from another goroutine
	}
	if (change.Position{File: pos.Name, Pos: pos.Pos}).Compare(h.end) >= 0 || h.want > 0 && h.rows >= h.want {
		return errReachedEnd
	}
	return nil
}

func (h *canalCounter) String() string { return "bench.canalCounter" }
