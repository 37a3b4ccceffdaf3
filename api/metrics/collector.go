package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// The label names of the families.
var (
	destLabels     = []string{"dest"}
	sourceLabels   = []string{"dest", "source"}
	consumerLabels = []string{"dest", "client"}
)

// family is one metric family of a Collector.
type family struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
}

func newFamily(name, help string, kind prometheus.ValueType, labels []string) family {
	return family{desc: prometheus.NewDesc(name, help, labels, nil), kind: kind}
}

// The families a Collector renders; docs/operations.md lists them.
var (
	// Per source.
	sourceConnected = newFamily("braid_source_connected",
		"1 while the source's binlog connection streams, else 0.", prometheus.GaugeValue, sourceLabels)
	sourceIdle = newFamily("braid_source_idle",
		"1 while braid has read everything the source has and it sends only heartbeats (caught up, no traffic; lag 0).", prometheus.GaugeValue, sourceLabels)
	sourceBehind = newFamily("braid_source_behind",
		"1 while the source is known to hold binlog braid has not read (its end of binlog is after braid's read position).", prometheus.GaugeValue, sourceLabels)
	sourceLag = newFamily("braid_source_lag_seconds",
		"How far braid's reading trails the source: 0 while idle, else the time since the newer of the last event's commit and the last heartbeat (it grows while the source is down).", prometheus.GaugeValue, sourceLabels)
	sourceWaiting = newFamily("braid_source_waiting",
		"1 while strict order waits for this source (it is behind the others, or down).", prometheus.GaugeValue, sourceLabels)
	sourceLastCommit = newFamily("braid_source_last_commit_timestamp_seconds",
		"Commit time of the source's last transaction offered to the merge, in Unix seconds.", prometheus.GaugeValue, sourceLabels)
	sourceEvents = newFamily("braid_source_events_total",
		"Binlog events read from the source (heartbeats not counted).", prometheus.CounterValue, sourceLabels)
	sourceBytes = newFamily("braid_source_bytes_total",
		"Bytes of binlog events read from the source.", prometheus.CounterValue, sourceLabels)
	sourceRows = newFamily("braid_source_rows_total",
		"Row changes of selected tables read from the source.", prometheus.CounterValue, sourceLabels)
	sourceErrors = newFamily("braid_source_errors_total",
		"Binlog connections to the source that failed or were refused.", prometheus.CounterValue, sourceLabels)
	sourceLastError = newFamily("braid_source_last_error_timestamp_seconds",
		"When the source's connection last failed, in Unix seconds (the error is the state's lastError).", prometheus.GaugeValue, sourceLabels)
	sourceSwitches = newFamily("braid_source_switches_total",
		"Times braid resumed the source on another server (a failover behind its address, or to another server its address lists), by GTID.", prometheus.CounterValue, sourceLabels)
	sourceLastSwitch = newFamily("braid_source_last_switch_timestamp_seconds",
		"When braid last resumed the source on another server, in Unix seconds (missing before the first switch).", prometheus.GaugeValue, sourceLabels)
	// Per source with an initial snapshot (spec snapshot: initial).
	snapshotRows = newFamily("braid_snapshot_rows_total",
		"Rows the source's initial snapshot emitted since the destination started on this node.", prometheus.CounterValue, sourceLabels)
	snapshotTables = newFamily("braid_snapshot_tables",
		"Tables the source's initial snapshot reads (0 until its reader has found them).", prometheus.GaugeValue, sourceLabels)
	snapshotTablesDone = newFamily("braid_snapshot_tables_done",
		"Tables the source's initial snapshot has read to the end.", prometheus.GaugeValue, sourceLabels)
	snapshotDone = newFamily("braid_snapshot_done",
		"1 once the source's initial snapshot has read every table, else 0.", prometheus.GaugeValue, sourceLabels)
	snapshotETA = newFamily("braid_snapshot_eta_seconds",
		"Time the source's initial snapshot still needs at its rate so far, from the servers' row estimates (0 when done or not known).", prometheus.GaugeValue, sourceLabels)

	// Per destination.
	destHeadSeq = newFamily("braid_destination_head_seq",
		"The seq of the last transaction the merge emitted.", prometheus.GaugeValue, destLabels)
	destLate = newFamily("braid_destination_late_transactions_total",
		"Transactions that came below a watermark already passed (a source clock beyond max_clock_skew) and went out of commit-time order.", prometheus.CounterValue, destLabels)
	destUndercut = newFamily("braid_destination_undercut_transactions_total",
		"Transactions that came below their own source's watermark (it promised too much: a clock behind, a slow commit): each could have gone out late.", prometheus.CounterValue, destLabels)
	destWaiting = newFamily("braid_destination_waiting_sources",
		"How many sources strict order is waiting for.", prometheus.GaugeValue, destLabels)
	destStoreEvents = newFamily("braid_destination_store_events",
		"Events the destination's store holds for its consumers.", prometheus.GaugeValue, destLabels)
	destStoreBytes = newFamily("braid_destination_store_bytes",
		"Bytes the destination's store holds (its own accounting of the events).", prometheus.GaugeValue, destLabels)
	destStorePeak = newFamily("braid_destination_store_peak_bytes",
		"The largest store_bytes since the store was made.", prometheus.GaugeValue, destLabels)
	sinkLabels   = []string{"dest", "sink"}
	sinkApplied  = newFamily("braid_sink_applied_seq", "The seq of the last transaction the sink applied whole.", prometheus.GaugeValue, sinkLabels)
	sinkLagSeq   = newFamily("braid_sink_lag_seq", "Transactions the destination is ahead of the sink.", prometheus.GaugeValue, sinkLabels)
	sinkRows     = newFamily("braid_sink_rows_total", "Row changes the sink applied since it started on this node.", prometheus.CounterValue, sinkLabels)
	sinkUpserts  = newFamily("braid_sink_upserts_total", "INSERTs the sink applied that found their key in the target.", prometheus.CounterValue, sinkLabels)
	sinkMissing  = newFamily("braid_sink_missing_rows_total", "UPDATEs and DELETEs the sink applied that found no row (an UPDATE then inserts its after-image).", prometheus.CounterValue, sinkLabels)
	sinkReplayed = newFamily("braid_sink_replayed_rows_total", "Row changes a mysql sink applied as the binlog's row events (BINLOG statements), not SQL statements.", prometheus.CounterValue, sinkLabels)
	sinkUp       = newFamily("braid_sink_up", "1 while the sink applies without an error, 0 while it retries.", prometheus.GaugeValue, sinkLabels)
	sinkLagSec   = newFamily("braid_sink_lag_seconds", "How long ago the last transaction the sink applied committed at its source, while the destination is ahead (0 when caught up).", prometheus.GaugeValue, sinkLabels)
	sinkConfl    = newFamily("braid_sink_conflicts_total", "Changes that waited for another worker to apply one of their keys first.", prometheus.CounterValue, sinkLabels)
	sinkPending  = newFamily("braid_sink_pending_confirms", "Messages a rabbitmq or kafka sink sent that the broker has not confirmed yet.", prometheus.GaugeValue, sinkLabels)
	sinkReturns  = newFamily("braid_sink_returns_total", "Messages the broker handed back to a rabbitmq sink as unroutable (the sink retries each until a queue takes it).", prometheus.CounterValue, sinkLabels)
	ddlLocks     = newFamily("braid_ddl_locks",
		"Open shard-DDL locks: logical tables whose shard tables have not all run a DDL one of them ran.", prometheus.GaugeValue, destLabels)
	ddlLockPending = newFamily("braid_ddl_lock_pending",
		"Open shard-DDL locks older than the spec's ddl_lock_warn_after: run the DDL on the shard tables waiting, or braid ddl unlock|skip.", prometheus.GaugeValue, destLabels)
	ddlHeldRows = newFamily("braid_ddl_held_rows",
		"Row changes held by open shard-DDL locks (re-read from the binlog when they release).", prometheus.GaugeValue, destLabels)
	destConsumers = newFamily("braid_destination_consumers",
		"Client ids subscribed to the destination's store.", prometheus.GaugeValue, destLabels)

	// Per consumer.
	consumerAcked = newFamily("braid_consumer_acked_seq",
		"The seq of the last transaction the client id acked whole (0 before its first ack).", prometheus.GaugeValue, consumerLabels)
	consumerLagSeq = newFamily("braid_consumer_lag_seq",
		"Transactions the client id has not acked: head seq minus acked seq.", prometheus.GaugeValue, consumerLabels)
	consumerLagSeconds = newFamily("braid_consumer_lag_seconds",
		"0 when the client id acked the head, else the time since the commit of the last transaction it acked (missing before its first ack).", prometheus.GaugeValue, consumerLabels)
	consumerUnacked = newFamily("braid_consumer_unacked_events",
		"Events the store holds for the client id, handed out or not: once the store is full, the slowest client id holds the stream back.", prometheus.GaugeValue, consumerLabels)
)

var families = []family{
	sourceConnected, sourceIdle, sourceBehind, sourceLag, sourceWaiting, sourceLastCommit,
	sourceEvents, sourceBytes, sourceRows, sourceErrors, sourceLastError, sourceSwitches, sourceLastSwitch,
	snapshotRows, snapshotTables, snapshotTablesDone, snapshotDone, snapshotETA,
	destHeadSeq, destLate, destUndercut, destWaiting, destStoreEvents, destStoreBytes, destStorePeak, destConsumers,
	ddlLocks, ddlLockPending, ddlHeldRows,
	sinkApplied, sinkLagSeq, sinkRows, sinkUpserts, sinkMissing, sinkReplayed, sinkUp, sinkLagSec, sinkConfl, sinkPending, sinkReturns,
	consumerAcked, consumerLagSeq, consumerLagSeconds, consumerUnacked,
}

// Collector is a prometheus.Collector of the destinations of a
// stream.Registry, read at each scrape.
type Collector struct {
	reg  *stream.Registry
	show func(dest string) bool
	now  func() time.Time
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns the collector of reg's destinations for which show
// is true (nil: every one), such as those the scraping user may read.
func NewCollector(reg *stream.Registry, show func(dest string) bool) *Collector {
	return &Collector{reg: reg, show: show, now: time.Now}
}

// Describe sends every family's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range families {
		ch <- f.desc
	}
}

// Collect sends the families of every destination served now.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, name := range c.reg.Names() {
		if c.show != nil && !c.show(name) {
			continue
		}
		s, err := c.reg.Lookup(name)
		if err != nil {
			continue // gone since Names
		}
		c.collect(ch, s, c.now())
	}
}

// collect sends one destination's families.
func (c *Collector) collect(ch chan<- prometheus.Metric, s *stream.Served, now time.Time) {
	emit := func(f family, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(f.desc, f.kind, v, labels...)
	}
	clients := s.Store.Clients()
	var gs *group.Stats
	if s.Stats != nil {
		st := s.Stats()
		gs = &st
	}
	st := s.Store.Stats()
	emit(destStoreEvents, float64(st.Events), s.Name)
	emit(destStoreBytes, float64(st.Bytes), s.Name)
	emit(destStorePeak, float64(st.PeakBytes), s.Name)
	emit(destConsumers, float64(len(clients)), s.Name)
	if s.Sinks != nil {
		var head uint64
		if gs != nil {
			head = gs.Seq
		}
		for _, sk := range s.Sinks() {
			l := []string{s.Name, sk.Name}
			emit(sinkApplied, float64(sk.AppliedSeq), l...)
			emit(sinkLagSeq, float64(head-min(head, sk.AppliedSeq)), l...)
			emit(sinkRows, float64(sk.Rows), l...)
			emit(sinkUpserts, float64(sk.Upserts), l...)
			emit(sinkMissing, float64(sk.Missing), l...)
			if sk.Type == spec.SinkMySQL {
				emit(sinkReplayed, float64(sk.Replayed), l...)
			}
			emit(sinkUp, boolValue(sk.Running && sk.LastError == ""), l...)
			emit(sinkConfl, float64(sk.Conflicts), l...)
			if sk.Type == spec.SinkRabbitMQ || sk.Type == spec.SinkKafka {
				emit(sinkPending, float64(sk.Pending), l...)
				emit(sinkReturns, float64(sk.Returns), l...)
			}
			if sk.AppliedSeq >= head || !sk.AppliedAt.IsZero() {
				emit(sinkLagSec, sk.LagSeconds(head, now), l...)
			}
		}
	}
	if s.ShardDDL != nil {
		if ddl := s.ShardDDL(); ddl != nil {
			pending, held := 0, int64(0)
			for _, l := range ddl.Locks {
				if now.Sub(l.Since) >= s.DDLLockWarnAfter {
					pending++
				}
				held += l.HeldRows
			}
			emit(ddlLocks, float64(len(ddl.Locks)), s.Name)
			emit(ddlLockPending, float64(pending), s.Name)
			emit(ddlHeldRows, float64(held), s.Name)
		}
	}
	if gs != nil {
		emit(destHeadSeq, float64(gs.Seq), s.Name)
		emit(destLate, float64(gs.Late), s.Name)
		emit(destUndercut, float64(gs.Undercut), s.Name)
		waiting := 0
		for _, src := range gs.Sources {
			l := []string{s.Name, src.Name}
			emit(sourceConnected, boolValue(src.Connected), l...)
			emit(sourceIdle, boolValue(src.Idle), l...)
			emit(sourceBehind, boolValue(src.Behind), l...)
			emit(sourceLag, src.Lag.Seconds(), l...)
			emit(sourceWaiting, boolValue(src.Waiting), l...)
			if !src.LastCommit.IsZero() {
				emit(sourceLastCommit, unixSeconds(src.LastCommit), l...)
			}
			emit(sourceEvents, float64(src.Events), l...)
			emit(sourceBytes, float64(src.Bytes), l...)
			emit(sourceRows, float64(src.Rows), l...)
			emit(sourceErrors, float64(src.Errors), l...)
			if !src.LastErrorAt.IsZero() {
				emit(sourceLastError, unixSeconds(src.LastErrorAt), l...)
			}
			emit(sourceSwitches, float64(src.Switches), l...)
			if !src.LastSwitchAt.IsZero() {
				emit(sourceLastSwitch, unixSeconds(src.LastSwitchAt), l...)
			}
			if sn := src.Snapshot; sn != nil {
				emit(snapshotRows, float64(sn.Rows), l...)
				emit(snapshotTables, float64(sn.Tables), l...)
				emit(snapshotTablesDone, float64(sn.TablesDone), l...)
				emit(snapshotDone, boolValue(sn.Done), l...)
				emit(snapshotETA, sn.ETA.Seconds(), l...)
			}
			if src.Waiting {
				waiting++
			}
		}
		emit(destWaiting, float64(waiting), s.Name)
	}
	for _, cl := range clients {
		l := []string{s.Name, cl.ID}
		emit(consumerAcked, float64(cl.AckedSeq), l...)
		emit(consumerUnacked, float64(cl.Unacked), l...)
		if gs == nil {
			continue
		}
		var lagSeq uint64
		if gs.Seq > cl.AckedSeq {
			lagSeq = gs.Seq - cl.AckedSeq
		}
		emit(consumerLagSeq, float64(lagSeq), l...)
		switch {
		case lagSeq == 0:
			emit(consumerLagSeconds, 0, l...)
		case !cl.AckedAt.IsZero():
			emit(consumerLagSeconds, max(0, now.Sub(cl.AckedAt).Seconds()), l...)
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }
