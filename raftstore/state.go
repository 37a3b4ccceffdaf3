package raftstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/braid-cdc/braid/spec"
)

// state is the replicated state machine's whole state: a plain value that
// commands change, with no goroutines, locks, clock or I/O. Applying the
// same commands at the same indexes to equal states gives equal states and
// results on every node.
type state struct {
	// Applied is the log index of the last command applied.
	Applied uint64 `json:"applied"`
	// Dests are the destinations by name.
	Dests map[string]*destRecord `json:"dests"`
}

// destRecord is one destination with everything that hangs off it.
type destRecord struct {
	// Spec is the spec as canonical YAML (spec.Spec's own form: its
	// durations and start positions have YAML marshalers, not JSON ones).
	Spec string `json:"spec"`
	// Version is the index of the create or last update.
	Version uint64 `json:"version"`
	// Owner is the node that runs the destination, "" for none.
	Owner string `json:"owner,omitempty"`
	// Epoch is the index of the last assignment; 0 if never assigned.
	Epoch uint64 `json:"epoch,omitempty"`
	// Cursors are by client id.
	Cursors map[string]*cursorRecord `json:"cursors,omitempty"`
	// Schemas are the schema histories the cursors name, by source name,
	// then hash. A history no cursor names is dropped.
	Schemas map[string]map[string]json.RawMessage `json:"schemas,omitempty"`
	// Decisions are the operators' shard-DDL decisions, in the order they
	// were made (absent from snapshots written before there were any).
	Decisions []decisionRecord `json:"decisions,omitempty"`
	// Chunks are the initial snapshot's chunks, in the order kept.
	Chunks []chunkRecord `json:"chunks,omitempty"`

	spec *spec.Spec // Spec parsed; never modified, copied out by reads
}

// result is what applying a command returns through the ApplyFuture (and,
// encoded, through a forwarded write).
type result struct {
	// Index is the log index of the command: the destination's new Version
	// (create, update) or new epoch (assign).
	Index uint64
	// Skipped counts cursor entries not applied because the stored cursor
	// was further on (a higher seq).
	Skipped int
	Err     error // an *opError, or nil
}

func newState() *state { return &state{Dests: map[string]*destRecord{}} }

// parseStoredSpec reads a spec from the log. It does not validate: a spec
// was validated by the node that proposed it, and a newer braid's stricter
// rules must not make an old log unreplayable.
func parseStoredSpec(text string) (*spec.Spec, error) {
	var s spec.Spec
	if err := yaml.Unmarshal([]byte(text), &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// apply applies c, the command at log index index.
func (s *state) apply(index uint64, c *command) result {
	if index > s.Applied {
		s.Applied = index
	}
	res := result{Index: index}
	switch c.Type {
	case cmdCreateDest, cmdUpdateDest:
		spec, err := parseStoredSpec(string(c.Spec))
		if err != nil {
			res.Err = failf(codeBadCommand, "%s %q: spec: %v", c.Type, c.Dest, err)
			return res
		}
		if spec.Name != c.Dest {
			res.Err = failf(codeBadCommand, "%s %q: spec names %q", c.Type, c.Dest, spec.Name)
			return res
		}
		d, ok := s.Dests[c.Dest]
		switch {
		case c.Type == cmdCreateDest && ok:
			res.Err = failf(codeExists, "destination %q", c.Dest)
			return res
		case c.Type == cmdUpdateDest && !ok:
			res.Err = failf(codeNotFound, "destination %q", c.Dest)
			return res
		case !ok:
			d = &destRecord{}
			s.Dests[c.Dest] = d
		}
		d.Spec, d.spec, d.Version = string(c.Spec), spec, index
	case cmdDeleteDest:
		if _, ok := s.Dests[c.Dest]; !ok {
			res.Err = failf(codeNotFound, "destination %q", c.Dest)
			return res
		}
		delete(s.Dests, c.Dest)
	case cmdAssign:
		d, ok := s.Dests[c.Dest]
		if !ok {
			res.Err = failf(codeNotFound, "destination %q", c.Dest)
			return res
		}
		if c.Conditional && c.IfEpoch != d.Epoch {
			res.Err = failf(codeStaleEpoch, "assign %q: epoch %d, current %d (owner %q)", c.Dest, c.IfEpoch, d.Epoch, d.Owner)
			return res
		}
		d.Owner, d.Epoch = c.Owner, index
	case cmdSaveCursors:
		return s.saveCursors(index, c)
	case cmdSaveDecision:
		return s.saveDecision(index, c)
	case cmdSaveChunk:
		d, err := s.owned(c, fmt.Sprintf("snapshot chunk %d of %q", c.Chunk.Index, c.Dest))
		if err == nil {
			d.Chunks = append(d.Chunks, c.Chunk)
		}
		return result{Index: index, Err: err}
	default:
		res.Err = failf(codeBadCommand, "unknown type %d", byte(c.Type))
	}
	return res
}

// saveCursors applies a batch all or nothing: it is refused whole if the
// epoch is stale or a cursor names a schema history neither held nor in the
// batch. Entries with a lower seq than the stored cursor are skipped, so a
// cursor never moves backwards.
func (s *state) saveCursors(index uint64, c *command) result {
	res := result{Index: index}
	d, err := s.owned(c, fmt.Sprintf("cursors of %q", c.Dest))
	if err != nil {
		res.Err = err
		return res
	}
	for _, b := range c.Schemas {
		if !json.Valid(b.Data) || b.Hash == "" {
			res.Err = failf(codeBadCommand, "cursors of %q: schema %s of source %q is not JSON", c.Dest, b.Hash, b.Source)
			return res
		}
	}
	known := func(source, hash string) bool {
		if _, ok := d.Schemas[source][hash]; ok {
			return true
		}
		return slices.ContainsFunc(c.Schemas, func(b schemaBlob) bool { return b.Source == source && b.Hash == hash })
	}
	for _, ce := range c.Cursors {
		for _, src := range ce.Cursor.Sources {
			if src.Schema != "" && !known(src.Name, src.Schema) {
				res.Err = failf(codeUnknownSchema, "cursor of %q/%q: source %q: schema %s", c.Dest, ce.Client, src.Name, src.Schema)
				return res
			}
		}
	}
	if d.Schemas == nil {
		d.Schemas = map[string]map[string]json.RawMessage{}
	}
	for _, b := range c.Schemas {
		m := d.Schemas[b.Source]
		if m == nil {
			m = map[string]json.RawMessage{}
			d.Schemas[b.Source] = m
		}
		m[b.Hash] = json.RawMessage(b.Data)
	}
	if d.Cursors == nil {
		d.Cursors = map[string]*cursorRecord{}
	}
	for _, ce := range c.Cursors {
		if ce.Delete {
			delete(d.Cursors, ce.Client)
			continue
		}
		if old, ok := d.Cursors[ce.Client]; ok && old.Seq > ce.Cursor.Seq {
			res.Skipped++
			continue
		}
		rec := ce.Cursor
		d.Cursors[ce.Client] = &rec
	}
	d.collectSchemas()
	return res
}

// saveDecision appends a decision, fenced like a cursor batch: refused if
// the epoch is not the destination's current one or it has no owner.
func (s *state) saveDecision(index uint64, c *command) result {
	d, err := s.owned(c, fmt.Sprintf("decision of %q about lock %d", c.Dest, c.Decision.Lock))
	if err == nil {
		d.Decisions = append(d.Decisions, c.Decision)
	}
	return result{Index: index, Err: err}
}

// owned returns c's destination if c's epoch is its current one (it has
// an owner, whose write c is); what names the write in the error.
func (s *state) owned(c *command, what string) (*destRecord, error) {
	d, ok := s.Dests[c.Dest]
	if !ok {
		return nil, failf(codeNotFound, "destination %q", c.Dest)
	}
	if d.Owner == "" || c.Epoch != d.Epoch {
		return nil, failf(codeStaleEpoch, "%s: epoch %d, current %d (owner %q)", what, c.Epoch, d.Epoch, d.Owner)
	}
	return d, nil
}

// collectSchemas drops the schema histories no cursor names.
func (d *destRecord) collectSchemas() {
	used := map[[2]string]bool{}
	for _, c := range d.Cursors {
		for _, src := range c.Sources {
			if src.Schema != "" {
				used[[2]string{src.Name, src.Schema}] = true
			}
		}
	}
	for source, m := range d.Schemas {
		for h := range m {
			if !used[[2]string{source, h}] {
				delete(m, h)
			}
		}
		if len(m) == 0 {
			delete(d.Schemas, source)
		}
	}
}

// snapVersion is the first byte of a snapshot; the rest is the state as
// JSON.
const snapVersion = 1

func (s *state) marshal() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(snapVersion)
	if err := json.NewEncoder(&buf).Encode(s); err != nil {
		return nil, fmt.Errorf("raftstore: encode snapshot: %w", err)
	}
	return buf.Bytes(), nil
}

func unmarshalState(data []byte) (*state, error) {
	if len(data) == 0 || data[0] != snapVersion {
		v := -1
		if len(data) > 0 {
			v = int(data[0])
		}
		return nil, failf(codeBadCommand, "snapshot version %d (this node reads version %d)", v, snapVersion)
	}
	s := newState()
	if err := json.Unmarshal(data[1:], s); err != nil {
		return nil, failf(codeBadCommand, "snapshot: %v", err)
	}
	if s.Dests == nil {
		s.Dests = map[string]*destRecord{}
	}
	for name, d := range s.Dests {
		if d == nil {
			return nil, failf(codeBadCommand, "snapshot: destination %q is null", name)
		}
		spec, err := parseStoredSpec(d.Spec)
		if err != nil {
			return nil, failf(codeBadCommand, "snapshot: destination %q: %v", name, err)
		}
		d.spec = spec
	}
	return s, nil
}
