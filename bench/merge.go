package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// MergeHeartbeat is the replication heartbeat of the merged destination.
// Once a source has sent its whole binlog, strict order learns from its
// next heartbeat that nothing older will come, so a merged run's tail
// includes up to about one period of waiting.
const MergeHeartbeat = 100 * time.Millisecond

// GroupResult is what one run over several sources measured.
type GroupResult struct {
	// Result holds the totals: Rows summed over the sources, Elapsed the
	// wall time from starting the run to the last source reaching its End,
	// FirstRow the time to the first row change of any source, PeakHeap the
	// process's peak heap while the run lasted.
	Result
	// Sources counts the selected row changes delivered per source, in the
	// order of the configurations.
	Sources []int
	// StorePeak is the merged run's store's peak of held bytes (0 for the
	// other runs).
	StorePeak int64
	// Steady is the merged run's wall time from its first row change to
	// the one that took it to SteadyShare of the row changes it wanted,
	// SteadyRows how many those are: its rate without its start-up and its
	// tail, where in strict order a source's last transactions wait for
	// the others' next heartbeat (up to MergeHeartbeat, a third of a run of
	// 864,000 row changes). Zero when MergeBraid is not given a want.
	Steady     time.Duration
	SteadyRows int
}

// SteadyShare is the part of a merged run's row changes GroupResult.Steady
// covers.
const SteadyShare = 0.95

// MergeStoreBytes bounds the store the merged run goes through, as a
// destination served to consumers does.
const MergeStoreBytes = 64 << 20

// DecodeBraidEach reads every configuration's binlog at once, one
// binlog.Reader each (see DecodeBraid), without merging: the single-source
// binlog.Reader's throughput on the same binlogs as MergeBraid.
func DecodeBraidEach(ctx context.Context, cfgs []DecodeConfig) (GroupResult, error) {
	return decodeEach(ctx, cfgs, decodeBraid)
}

// DecodeCanalEach reads every configuration's binlog at once, one canal
// each (see DecodeCanal).
func DecodeCanalEach(ctx context.Context, cfgs []DecodeConfig) (GroupResult, error) {
	return decodeEach(ctx, cfgs, decodeCanal)
}

// decodeEach runs decode on every configuration concurrently under one heap
// sampler. The first failure stops the others.
func decodeEach(ctx context.Context, cfgs []DecodeConfig, decode func(context.Context, DecodeConfig) (Result, error)) (GroupResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]Result, len(cfgs))
	var (
		mu    sync.Mutex
		first error // the first failure; the others may only follow it
	)
	heap := startHeapSampler()
	began := time.Now()
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		wg.Go(func() {
			var err error
			results[i], err = decode(ctx, cfg)
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("source %d (%s): %w", i, cfg.Addr, err)
				}
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	g := GroupResult{Result: Result{Elapsed: time.Since(began), PeakHeap: heap.Stop(), PeakLive: heap.Live()}, Sources: make([]int, len(cfgs))}
	for i, r := range results {
		g.Rows += r.Rows
		g.Sources[i] = r.Rows
		if r.Rows > 0 && (g.FirstRow == 0 || r.FirstRow < g.FirstRow) {
			g.FirstRow = r.FirstRow
		}
	}
	return g, first
}

// mergeSpec is the destination MergeBraid and CatchUp read: the
// configurations' servers as sources s0, s1, … from `earliest`, in strict
// order, with the first configuration's table filter.
func mergeSpec(cfgs []DecodeConfig) (*spec.Spec, error) {
	if len(cfgs) == 0 {
		return nil, errors.New("bench: merge: no source")
	}
	ds := spec.Spec{
		Name:      "bench-merge",
		Tables:    cfgs[0].Tables,
		Ordering:  "strict",
		Heartbeat: spec.Duration(MergeHeartbeat),
	}
	for i, cfg := range cfgs {
		ds.Sources = append(ds.Sources, spec.Source{
			Name: fmt.Sprintf("s%d", i), Address: cfg.Addr, User: cfg.User,
			Start: spec.Start{Kind: spec.StartEarliest},
		})
	}
	ds = ds.WithDefaults()
	if err := ds.Validate(); err != nil {
		return nil, fmt.Errorf("bench: merge: %w", err)
	}
	return &ds, nil
}

// MergeBraid reads the configurations' binlogs as the sources of one
// destination, merged in strict commit-time order by group.Destination:
// every source from `earliest`, the first configuration's table filter,
// heartbeat MergeHeartbeat, the other settings at their defaults.
//
// It counts the row changes of the merged stream's EventRows and stops at
// the first transaction boundary where every source has emitted a
// transaction ending at or after its End, or, when want is positive, where
// want row changes have arrived (a source whose last transactions select no
// row never shows its End in the merged stream: the merge consumes such
// transactions). It also checks what the stream promises: seq numbers are
// dense and increasing, a transaction's events come together, and the
// transactions come in merge-key order (commit time made monotone per
// source, then the source's index).
func MergeBraid(ctx context.Context, cfgs []DecodeConfig, want int) (GroupResult, error) {
	spec, err := mergeSpec(cfgs)
	if err != nil {
		return GroupResult{}, err
	}
	index := map[string]int{}
	for i, src := range spec.Sources {
		index[src.Name] = i
	}
	d, err := group.New(group.Config{Spec: spec})
	if err != nil {
		return GroupResult{}, fmt.Errorf("bench: merge: %w", err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		res     = GroupResult{Sources: make([]int, len(cfgs))}
		chk     = mergeChecker{last: make([]int64, len(cfgs))}
		done    = make([]bool, len(cfgs))
		ended   int
		reached bool
		began   time.Time
	)
	emit := func(ev *change.Event) error {
		if reached {
			return errReachedEnd // the destination is stopping; ignore what follows
		}
		src, ok := index[ev.Source]
		if !ok {
			return fmt.Errorf("bench: merge: event of unknown source %q", ev.Source)
		}
		if err := chk.check(src, ev); err != nil {
			return err
		}
		var end change.Position
		switch ev.Type {
		case change.EventRows:
			if res.Rows == 0 {
				res.FirstRow = time.Since(began)
			}
			res.Rows += len(ev.Rows)
			res.Sources[src] += len(ev.Rows)
			if res.SteadyRows == 0 && want > 0 && float64(res.Rows) >= SteadyShare*float64(want) {
				res.Steady, res.SteadyRows = time.Since(began)-res.FirstRow, res.Rows
			}
			return nil
		case change.EventCommit:
			end = ev.Pos
		case change.EventDDL:
			end = ev.EndPos
		default:
			return nil
		}
		if !done[src] && end.Compare(cfgs[src].End) >= 0 {
			done[src] = true
			ended++
		}
		if ended == len(cfgs) || (want > 0 && res.Rows >= want) {
			reached = true
			cancel()
		}
		return nil
	}

	// The merged stream goes through a bounded store to one consumer that
	// reads batches and acks them, as a served destination does.
	store := stream.NewStore(stream.Config{MaxBytes: MergeStoreBytes})
	store.Subscribe("bench")
	heap := startHeapSampler()
	began = time.Now()
	runDone := make(chan error, 1)
	go func() {
		runDone <- d.RunInto(runCtx, store)
		store.Close()
	}()
	var consumeErr error
	for consumeErr == nil && !reached {
		b, gerr := store.Get(runCtx, "bench", 1024, 100*time.Millisecond)
		if gerr != nil {
			break // closed or canceled: Run's error says why
		}
		for _, ev := range b.Events {
			if consumeErr = emit(ev); consumeErr != nil || reached {
				break
			}
		}
		if b.ID >= 0 && consumeErr == nil {
			consumeErr = store.Ack("bench", b.ID)
		}
	}
	cancel()
	err = <-runDone
	if err == nil {
		err = consumeErr
	}
	res.Elapsed = time.Since(began)
	res.PeakHeap = heap.Stop()
	res.PeakLive = heap.Live()
	res.StorePeak = store.Stats().PeakBytes
	switch {
	case err != nil:
		return res, fmt.Errorf("bench: merge: %w", err)
	case !reached:
		return res, fmt.Errorf("bench: merge: stopped with %d of %d sources at their end: %w", ended, len(cfgs), context.Cause(ctx))
	case d.Late() > 0:
		return res, fmt.Errorf("bench: merge: %d transactions came late, out of order", d.Late())
	}
	return res, nil
}

// mergeChecker checks the merged stream's order as it goes by.
type mergeChecker struct {
	seq    uint64    // the open or last transaction's seq
	opened bool      // a transaction is open (begun, not committed)
	open   int       // the open transaction's source
	last   []int64   // per source: its last merge-key time (µs)
	key    group.Key // the last transaction's merge key
	keyed  bool      // key is set
}

func (c *mergeChecker) check(src int, ev *change.Event) error {
	switch ev.Type {
	case change.EventBegin, change.EventDDL:
		if c.opened {
			return fmt.Errorf("bench: merge: seq %d (%s) began inside seq %d", ev.Seq, ev.Source, c.seq)
		}
		if ev.Seq != c.seq+1 {
			return fmt.Errorf("bench: merge: seq %d after %d: not dense", ev.Seq, c.seq)
		}
		c.seq = ev.Seq
		t := max(ev.CommitTime.UnixMicro(), c.last[src])
		c.last[src] = t
		k := group.Key{Time: t, Source: src}
		if c.keyed && k.Less(c.key) {
			return fmt.Errorf("bench: merge: seq %d (%s at %s) has key %s, below the previous %s", ev.Seq, ev.Source, ev.Pos, k, c.key)
		}
		c.key, c.keyed = k, true
		c.opened, c.open = ev.Type == change.EventBegin, src
	case change.EventRows, change.EventCommit:
		if !c.opened || c.open != src || ev.Seq != c.seq {
			return fmt.Errorf("bench: merge: %s event of seq %d (%s) outside its transaction (open: %v, seq %d)", ev.Type, ev.Seq, ev.Source, c.opened, c.seq)
		}
		if ev.Type == change.EventCommit {
			c.opened = false
		}
	}
	return nil
}

// mergeMemoryBound is the memory MergeBraid's destination may hold with n
// sources: its store's bound and, per source, its queue's bound and its
// parser's read-ahead.
func mergeMemoryBound(n int) float64 {
	return float64(group.MemoryBound(n, group.Config{}, MergeStoreBytes))
}

func mergeMemoryBoundString(n int) string {
	return fmt.Sprintf("store %d MiB + %d sources × (queue %d MiB + read-ahead %d events × %d KiB)",
		MergeStoreBytes>>20, n, group.DefaultQueueBytes>>20, group.DefaultReadAhead, group.ReadAheadEventBytes>>10)
}
