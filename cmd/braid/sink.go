package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/sink/verify"
	"github.com/braid-cdc/braid/spec"
)

// sinkCommand is braid sink's leaves.
var sinkCommand = &command{
	summary: "a destination's sinks: list and show them (applied seq, lag, rows, errors), verify a target against the sources",
	about:   "A destination's sinks (the spec's sinks:) apply its stream to a target; each runs on\nthe node that runs the destination, with a cursor of its own.",
	subs: map[string]*command{
		"list": {
			summary: "the sinks of a destination: applied seq, lag, rows, state",
			usage:   "sink list DEST [--server URL] [--json]",
			about: "Lists the sinks of destination DEST as the node that runs them sees them: the seq\n" +
				"each applied whole, how far it is behind (transactions, and seconds since the last\n" +
				"it applied committed), the row changes it applied and its rate over the last\n" +
				"second, the INSERTs that found their key and the UPDATEs and DELETEs that found no\n" +
				"row (never dropped: counted), the changes that waited for another worker to apply\n" +
				"one of their keys (conflicts), and its last error while it retries.",
			run: runSinkList,
		},
		"show": {
			summary: "one sink in full: state, spec, checkpoints",
			usage:   "sink show DEST SINK [--server URL] [--json]",
			about: "Shows sink SINK of destination DEST in full: its state (as braid sink list), its\n" +
				"spec (password hidden) and where each of its workers stands in the target (its\n" +
				"checkpoint: the last seq and row applied).",
			run: runSinkShow,
		},
		"verify": {
			summary: "compare a sink's target with the sources, row by row on a sample",
			usage: "sink verify DEST SINK [--sample N] [--table SCHEMA.TABLE]... [--timeout D] [--server URL] [--json]\n" +
				"sink verify -f SPEC DEST SINK [--sample N] [--table SCHEMA.TABLE]... [--timeout D] [--json]",
			about: verifyAbout,
			run:   runSinkVerify,
		},
	},
}

func runSinkShow(args []string, stdout, stderr io.Writer) int {
	a, code, ok := startAdmin(newFlags("sink show", stderr), args, stderr)
	if !ok {
		return code
	}
	defer a.cancel()
	if len(a.names) != 2 {
		fmt.Fprintln(stderr, "braid sink show: name the destination and the sink, e.g. braid sink show shop warehouse")
		return 2
	}
	d, err := a.ac.Sink(a.ctx, a.names[0], a.names[1])
	if err != nil {
		return a.fail(err)
	}
	if a.asJSON {
		printJSON(stdout, d)
		return 0
	}
	printSinkDetail(stdout, d)
	return 0
}

func runSinkList(args []string, stdout, stderr io.Writer) int {
	a, code, ok := startAdminOnDestination(newFlags("sink list", stderr), args, stderr)
	if !ok {
		return code
	}
	defer a.cancel()
	names, ac, ctx, fail := a.names, a.ac, a.ctx, a.fail
	sinks, err := ac.Sinks(ctx, names[0])
	if err != nil {
		return fail(err)
	}
	if a.asJSON {
		printJSON(stdout, sinks)
		return 0
	}
	if len(sinks) == 0 {
		fmt.Fprintf(stdout, "destination %s has no sinks\n", names[0])
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SINK\tTYPE\tADDRESS\tAPPLIED SEQ\tLAG\tLAG S\tROWS\tROWS/S\tUPSERTS\tMISSING\tCONFLICTS\tSTATE")
	for _, s := range sinks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.1f\t%d\t%.0f\t%d\t%d\t%d\t%s\n", s.Name, s.Type, s.Address, s.AppliedSeq, s.LagSeq, s.LagSeconds,
			s.Rows, s.RowsPerSecond, s.Upserts, s.Missing, s.Conflicts, sinkState(s))
	}
	tw.Flush()
	return 0
}

// sinkState is a sink's state in a word or two, and its error.
func sinkState(s wire.SinkState) string {
	switch {
	case !s.Running:
		return "connecting: " + s.LastError
	case s.LastError != "":
		return "retrying: " + s.LastError
	}
	return "applying"
}

// printSinkDetail prints braid sink show's answer.
func printSinkDetail(w io.Writer, d wire.SinkDetail) {
	s := d.State
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "sink:\t%s\n", s.Name)
	fmt.Fprintf(tw, "type:\t%s\n", s.Type)
	fmt.Fprintf(tw, "address:\t%s\n", s.Address)
	fmt.Fprintf(tw, "state:\t%s\n", sinkState(s))
	fmt.Fprintf(tw, "applied seq:\t%d of %d (lag %d, %.1f s)\n", s.AppliedSeq, d.HeadSeq, s.LagSeq, s.LagSeconds)
	switch spec.SinkType(s.Type) {
	case spec.SinkRabbitMQ, spec.SinkKafka:
		fmt.Fprintf(tw, "messages confirmed:\t%d, %.0f/s (pending %d, returned %d)\n", s.Rows, s.RowsPerSecond, s.Pending, s.Returns)
	default:
		fmt.Fprintf(tw, "rows applied:\t%d, %.0f/s (upserts %d, missing rows %d, conflicts %d)\n", s.Rows, s.RowsPerSecond, s.Upserts, s.Missing, s.Conflicts)
	}
	if spec.SinkType(s.Type) == spec.SinkMySQL {
		fmt.Fprintf(tw, "replayed:\t%d of the rows as binlog row events (the rest as SQL statements)\n", s.Replayed)
	}
	fmt.Fprintf(tw, "workers:\t%d\n", s.Workers)
	tw.Flush()
	if len(d.Spec) > 0 {
		var b bytes.Buffer
		if json.Indent(&b, d.Spec, "  ", "  ") == nil {
			fmt.Fprintf(w, "\nspec:\n  %s\n", b.String())
		}
	}
	switch {
	case d.CheckpointsError != "":
		fmt.Fprintf(w, "\ncheckpoints: not read: %s\n", d.CheckpointsError)
	case len(d.Checkpoints) > 0:
		fmt.Fprintln(w, "\ncheckpoints in the target:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  WORKER\tSEQ\tROW")
		for _, c := range d.Checkpoints {
			row := strconv.Itoa(c.Row)
			if c.Row == 1<<31-1 {
				row = "all"
			}
			fmt.Fprintf(tw, "  %d\t%d\t%s\n", c.Worker, c.Seq, row)
		}
		tw.Flush()
	}
}

// verifyTimeout is braid sink verify's default --timeout: a comparison
// may wait for the sink to catch up before it reads a difference again.
const verifyTimeout = 3 * time.Minute

// tableFlags collects repeated --table flags.
type tableFlags []string

func (t *tableFlags) String() string { return strings.Join(*t, ",") }
func (t *tableFlags) Set(v string) error {
	if _, _, ok := strings.Cut(v, "."); !ok {
		return fmt.Errorf("%q: write the logical table as schema.table, e.g. shop.orders", v)
	}
	*t = append(*t, v)
	return nil
}

// verifyAbout is braid sink verify's help.
const verifyAbout = "Compares sink SINK's target with the sources of destination DEST, on the node that\n" +
	"runs the sink: N random rows of each logical table at the sources (spread over its\n" +
	"shard tables) are looked up in the target, and N random rows of the target table\n" +
	"at the sources, every column compared. A row that differs is read again once the\n" +
	"sink has applied the stream as far as it went then (up to three times), so a change\n" +
	"not applied yet is not reported; what stays different is: a row missing from the\n" +
	"target, an extra row no source holds, or columns whose values differ. Nothing is\n" +
	"written.\n" +
	"Exit status: 0 no differences, 1 differences (or an error), 2 usage."

// runSinkVerify is `braid sink verify DEST SINK`, asked of a node, or
// with -f run here.
func runSinkVerify(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sink verify", stderr)
	conn, asJSON := adminFlags(fs)
	file := fs.String("f", "", "the destination's spec file: compare here, with no server, the sink's target and the sources where they stand (no re-check: a change not applied yet shows as a difference)")
	var refFlags secretRefFlags
	refFlags.add(fs, "with -f: a directory a spec's password_file may read from besides the spec file's own; comma-separated or repeated")
	sample := fs.Int("sample", 100, "rows to draw of each logical table at the sources, and as many from the target (1 to 100000)")
	var tables tableFlags
	fs.Var(&tables, "table", "compare only this logical table (schema.table); repeat for several (default: every one)")
	timeout := fs.Duration("timeout", verifyTimeout, "give up after this long")
	names, code, ok := parseNames(fs, args, stderr)
	if !ok {
		return code
	}
	if len(names) != 2 {
		fmt.Fprintln(stderr, "braid sink verify: name the destination and the sink, e.g. braid sink verify shop warehouse --sample 1000")
		return 2
	}
	if *sample < 1 || *sample > verify.MaxSample {
		fmt.Fprintf(stderr, "braid sink verify: --sample %d: want 1 to %d\n", *sample, verify.MaxSample)
		return 2
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "braid sink verify: --timeout %v: want a positive duration, e.g. 3m\n", *timeout)
		return 2
	}
	sctx, stop := signalContext()
	defer stop()
	ctx, cancel := context.WithTimeout(sctx, *timeout)
	defer cancel()
	var rep wire.SinkVerify
	if *file != "" {
		var server string
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "server" || f.Name == "token-file" || f.Name == "ca" {
				server = f.Name
			}
		})
		if server != "" {
			fmt.Fprintf(stderr, "braid sink verify: -f compares here, --%s asks a node: give one of them\n", server)
			return 2
		}
		ds, err := loadSpec(fs, &refFlags, *file)
		if err != nil {
			for _, line := range errorLines(err) {
				fmt.Fprintln(stderr, "braid sink verify:", line)
			}
			return 2
		}
		log, _ := newLogger(stderr, "warn")
		if rep, err = verifyHere(ctx, ds, names[0], names[1], *sample, tables, log); err != nil {
			fmt.Fprintln(stderr, "braid sink verify:", oneLine(err))
			return 1
		}
	} else {
		fail := func(err error) int {
			fmt.Fprintf(stderr, "braid sink verify: %s\n", oneLine(adminError(conn.server, err)))
			return 1
		}
		ac, err := conn.client()
		if err != nil {
			return fail(err)
		}
		if rep, err = ac.VerifySink(ctx, names[0], names[1], *sample, tables...); err != nil {
			return fail(err)
		}
	}
	if *asJSON {
		printJSON(stdout, rep)
	} else {
		printVerify(stdout, rep, *file != "")
	}
	if len(rep.Differences) > 0 {
		return 1
	}
	return 0
}

// printVerify prints braid sink verify's answer: the differences, then
// a summary; here says it was compared here, with no stream (-f).
func printVerify(w io.Writer, rep wire.SinkVerify, here bool) {
	if rep.Published {
		fmt.Fprintf(w, "sink %s of %s publishes messages, which its consumers compare: the last seq published and confirmed is %d, the destination's head %d\n",
			rep.Sink, rep.Destination, rep.AppliedSeq, rep.HeadSeq)
		return
	}
	if len(rep.Differences) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TABLE\tKEY\tORIGIN\tDIFFERENCE\tCOLUMN\tSOURCE\tTARGET")
		for _, d := range rep.Differences {
			var key []string
			for _, k := range d.Key {
				key = append(key, k.Column+"="+sqlText(k.Value))
			}
			origin := d.Origin
			if origin == "" {
				origin = "-"
			}
			head := fmt.Sprintf("%s\t%s\t%s\t%s", d.Table, strings.Join(key, ","), origin, d.Kind)
			switch d.Kind {
			case wire.DiffMissing:
				fmt.Fprintf(tw, "%s\t\tin the source, not in %s\t\n", head, d.Target)
			case wire.DiffExtra:
				fmt.Fprintf(tw, "%s\t\t\tin %s, at no source\n", head, d.Target)
			default:
				for _, c := range d.Columns {
					target := sqlText(c.Target)
					if c.NoColumn {
						target = "(no such column in " + d.Target + ")"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", head, c.Column, sqlText(c.Source), target)
				}
			}
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "sink %s of %s: %d rows compared in %s (%d drawn at the sources, %d in the target): %d differ\n",
		rep.Sink, rep.Destination, rep.Compared, strings.Join(rep.Tables, ", "), rep.SourceRows, rep.TargetRows, len(rep.Differences))
	if here {
		fmt.Fprintln(w, "compared here, where the target and the sources stand: a change the sink has not applied yet shows as a difference (braid sink verify without -f, asked of the node that runs the sink, reads differences again once it has)")
		return
	}
	fmt.Fprintf(w, "applied seq %d; the destination's head was %d at the first read", rep.AppliedSeq, rep.HeadSeq)
	if rep.Rechecks > 0 {
		fmt.Fprintf(w, "; differences read again %d times once the sink had caught up", rep.Rechecks)
	}
	fmt.Fprintln(w)
	if !rep.Settled {
		fmt.Fprintln(w, "the sink did not catch up with the destination in time to read the differences again: some may be changes it has not applied yet (braid sink list shows its lag and error)")
	}
}

// sqlText is a value as SQL writes it: NULL, or quoted.
func sqlText(v *string) string {
	if v == nil {
		return "NULL"
	}
	return "'" + strings.ReplaceAll(*v, "'", "''") + "'"
}
