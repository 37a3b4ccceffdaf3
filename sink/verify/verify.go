package verify

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/sink/mysql"
	"github.com/braid-cdc/braid/spec"
)

// Config is one verify run's.
type Config struct {
	// Spec is the destination, its source passwords readable (as the node
	// that runs its sinks has them).
	Spec *spec.Spec
	// Sink is the sink's entry of Spec, Target its open target.
	Sink   spec.Sink
	Target Target
	// Sample is how many rows to draw of each logical table at the
	// sources, and as many from the target. Default: 100.
	Sample int
	// Tables are the logical tables to compare ("schema.table"). Default:
	// every logical table the sources have.
	Tables []string
	// Progress returns the destination's head seq and the sink's applied
	// seq. Nil when no stream runs here (braid sink verify -f): the target
	// is compared where it stands, once, with no re-check; HeadSeq and
	// AppliedSeq are then 0, and Settled is true only when nothing
	// differs.
	Progress func() (head, applied uint64)
	// Settle is how long a re-check waits for the sink to reach the head.
	// Default: 20s.
	Settle time.Duration
	// Rand draws the rows; default: seeded at random.
	Rand *rand.Rand
	// Logger; default: discard.
	Logger *slog.Logger
}

// DefaultSample is Config.Sample's default.
const DefaultSample = 100

// MaxSample bounds Config.Sample.
const MaxSample = 100_000

// rechecks is how many times a difference is read again.
const rechecks = 3

// item is one row to compare: a key of a logical table, and the shard
// tables that may hold it at the sources.
type item struct {
	logical string
	shards  []Shard
	key     []*string
	// origin is the shard table the target row is asked of (the origin
	// column's value), "" for any.
	origin string
}

// Run compares cfg's target with the sources (see the package comment).
// The error is for what kept it from comparing; differences are in the
// answer.
func Run(ctx context.Context, cfg Config) (wire.SinkVerify, error) {
	if cfg.Sample <= 0 {
		cfg.Sample = DefaultSample
	}
	if cfg.Sample > MaxSample {
		return wire.SinkVerify{}, fmt.Errorf("sample %d: at most %d", cfg.Sample, MaxSample)
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 20 * time.Second
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	rep := wire.SinkVerify{Destination: cfg.Spec.Name, Sink: cfg.Sink.Name, Sample: cfg.Sample, Differences: []wire.SinkDifference{}}
	srcs, err := OpenSources(cfg.Spec)
	if err != nil {
		return rep, err
	}
	defer srcs.Close()
	shards, err := srcs.Shards(ctx)
	if err != nil {
		return rep, err
	}
	rep.Tables = cfg.Tables
	if len(rep.Tables) == 0 {
		for l := range shards {
			rep.Tables = append(rep.Tables, l)
		}
		slices.Sort(rep.Tables)
	}
	for _, l := range rep.Tables {
		if len(shards[l]) == 0 {
			known := make([]string, 0, len(shards))
			for k := range shards {
				known = append(known, k)
			}
			slices.Sort(known)
			return rep, fmt.Errorf("no shard table of the sources is routed to logical table %q: the sources have %s", l, strings.Join(known, ", "))
		}
	}
	v := &verifier{cfg: cfg, srcs: srcs, shards: shards}
	if cfg.Progress != nil {
		rep.HeadSeq, _ = cfg.Progress()
	}

	var items []item
	seen := map[string]bool{}
	add := func(it item) {
		k := it.logical + "\x00" + it.origin + "\x00" + keyText(it.key)
		if !seen[k] {
			seen[k] = true
			items = append(items, it)
		}
	}
	for _, l := range rep.Tables {
		src, tgt, err := v.draw(ctx, l, shards[l])
		if err != nil {
			return rep, err
		}
		rep.SourceRows += len(src)
		rep.TargetRows += len(tgt)
		for _, it := range append(src, tgt...) {
			add(it)
		}
	}
	rep.Compared = len(items)

	var diffs []item
	var found []wire.SinkDifference
	for _, it := range items {
		d, err := v.check(ctx, it)
		if err != nil {
			return rep, err
		}
		if d != nil {
			diffs, found = append(diffs, it), append(found, *d)
		}
	}
	rep.Settled = cfg.Progress != nil || len(diffs) == 0
	for cfg.Progress != nil && len(diffs) > 0 && rep.Rechecks < rechecks {
		if !v.settle(ctx) {
			rep.Settled = false
			break
		}
		rep.Rechecks++
		var still []item
		found = found[:0]
		for _, it := range diffs {
			d, err := v.check(ctx, it)
			if err != nil {
				return rep, err
			}
			if d != nil {
				still, found = append(still, it), append(found, *d)
			}
		}
		diffs = still
	}
	rep.Differences = append(rep.Differences, found...)
	if cfg.Progress != nil {
		_, rep.AppliedSeq = cfg.Progress()
	}
	cfg.Logger.Info("sink verified", "dest", cfg.Spec.Name, "sink", cfg.Sink.Name, "compared", rep.Compared,
		"differences", len(rep.Differences), "rechecks", rep.Rechecks, "settled", rep.Settled)
	return rep, nil
}

type verifier struct {
	cfg    Config
	srcs   *Sources
	shards map[string][]Shard // by logical table
}

// settleEvery is how often settle looks at the sink's progress; the
// first look waits for it too, so that what the sources committed just
// before is in the stream.
const settleEvery = 200 * time.Millisecond

// settle waits until the sink has applied the destination's head seq of
// now; false when it did not within Settle.
func (v *verifier) settle(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(2 * settleEvery):
	}
	head, _ := v.cfg.Progress()
	deadline := time.Now().Add(v.cfg.Settle)
	for {
		if _, applied := v.cfg.Progress(); applied >= head {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(settleEvery):
		}
	}
}

// draw returns the rows to compare of logical table l: Sample of its
// shard tables, and Sample of the target table.
func (v *verifier) draw(ctx context.Context, l string, shards []Shard) (src, tgt []item, err error) {
	key, err := v.key(ctx, shards)
	if err != nil {
		return nil, nil, err
	}
	order := slices.Clone(shards)
	v.cfg.Rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	left := v.cfg.Sample
	for i, sh := range order {
		share := (left + len(order) - i - 1) / (len(order) - i)
		if share == 0 {
			break
		}
		rows, err := v.srcs.Sample(ctx, sh, share, v.cfg.Rand)
		if err != nil {
			return nil, nil, err
		}
		left -= len(rows)
		for _, r := range rows {
			it := item{logical: l, shards: []Shard{sh}, key: values(r, key)}
			if v.cfg.Sink.OriginColumn != "" {
				it.origin = sh.String()
			}
			src = append(src, it)
		}
	}
	rows, err := v.cfg.Target.Sample(ctx, l, v.cfg.Sample)
	if err != nil {
		return nil, nil, fmt.Errorf("sink %s: sample the target table of %s: %w", v.cfg.Sink.Name, l, err)
	}
	for _, r := range rows {
		it := item{logical: l, shards: shards, key: values(r, key)}
		if oc := v.cfg.Sink.OriginColumn; oc != "" {
			it.origin, it.shards = "", nil
			if o := r[oc]; o != nil {
				it.origin = *o
			}
			for _, sh := range shards {
				if sh.String() == it.origin {
					it.shards = []Shard{sh}
				}
			}
		}
		tgt = append(tgt, it)
	}
	return src, tgt, nil
}

// key is the key columns of a logical table: its first shard table's.
func (v *verifier) key(ctx context.Context, shards []Shard) ([]string, error) {
	info, err := v.srcs.Describe(ctx, shards[0])
	if err != nil {
		return nil, err
	}
	return info.Key, nil
}

// check reads an item's row at the sources and in the target; a
// difference, or nil when they agree.
func (v *verifier) check(ctx context.Context, it item) (*wire.SinkDifference, error) {
	keyCols, err := v.key(ctx, v.allShards(it))
	if err != nil {
		return nil, err
	}
	type held struct {
		sh   Shard
		row  map[string]*string
		info *mysql.TableInfo
	}
	var at []held
	args := make([]any, len(it.key))
	for i, k := range it.key {
		if k != nil {
			args[i] = *k
		}
	}
	for _, sh := range it.shards {
		row, found, err := v.srcs.Lookup(ctx, sh, keyCols, args)
		if err != nil {
			return nil, err
		}
		if found {
			info, err := v.srcs.Describe(ctx, sh)
			if err != nil {
				return nil, err
			}
			at = append(at, held{sh, row, info})
		}
	}
	trow, inTarget, err := v.cfg.Target.Lookup(ctx, it.logical, keyCols, it.key, it.origin)
	if err != nil {
		return nil, fmt.Errorf("sink %s: look a row of %s up in the target: %w", v.cfg.Sink.Name, it.logical, err)
	}
	d := &wire.SinkDifference{Table: it.logical, Target: v.cfg.Sink.Target(it.logical), Origin: it.origin}
	for i, c := range keyCols {
		d.Key = append(d.Key, wire.ColumnValue{Column: c, Value: shown(it.key[i])})
	}
	switch {
	case len(at) == 0 && !inTarget:
		return nil, nil
	case len(at) == 0:
		d.Kind = wire.DiffExtra
		return d, nil
	case !inTarget:
		d.Kind, d.Origin = wire.DiffMissing, at[0].sh.String()
		return d, nil
	}
	for _, h := range at {
		var cols []wire.ColumnDiff
		for _, c := range h.info.Columns {
			tv, ok := column(trow, c)
			if !ok {
				cols = append(cols, wire.ColumnDiff{Column: c, Source: shown(h.row[c]), NoColumn: true})
			} else if !Equal(h.row[c], tv) {
				cols = append(cols, wire.ColumnDiff{Column: c, Source: shown(h.row[c]), Target: shown(tv)})
			}
		}
		if len(cols) == 0 {
			return nil, nil
		}
		if d.Columns == nil {
			d.Kind, d.Origin, d.Columns = wire.DiffValues, h.sh.String(), cols
		}
	}
	return d, nil
}

// allShards are the shard tables to take an item's key columns from:
// its own, or (an extra row of an unknown origin) its logical table's.
func (v *verifier) allShards(it item) []Shard {
	if len(it.shards) > 0 {
		return it.shards
	}
	return v.shards[it.logical]
}

// values are a row's values of cols.
func values(row map[string]*string, cols []string) []*string {
	out := make([]*string, len(cols))
	for i, c := range cols {
		out[i] = row[c]
	}
	return out
}

// keyText is a key as one string, for de-duplication.
func keyText(key []*string) string {
	var b strings.Builder
	for _, k := range key {
		b.WriteString(text(k))
		b.WriteByte(0)
	}
	return b.String()
}

func text(s *string) string {
	if s == nil {
		return "\x00NULL"
	}
	return *s
}

// shown is a value as the report shows it: as it is when it is UTF-8
// text, else 0x and its bytes in hex.
func shown(s *string) *string {
	if s == nil || utf8.ValidString(*s) {
		return s
	}
	h := "0x" + hex.EncodeToString([]byte(*s))
	return &h
}

// column is row's value of column name: by its name, or else by its name
// in any case, as MySQL compares column names (a PostgreSQL target's are
// lower case).
func column(row map[string]*string, name string) (*string, bool) {
	if v, ok := row[name]; ok {
		return v, true
	}
	for k, v := range row {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return nil, false
}
