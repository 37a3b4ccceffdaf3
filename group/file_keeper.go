package group

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// FileKeeper keeps one destination in a directory (braid capture
// --cursor-dir): each client's cursor as a JSON file replaced atomically
// (FileStore's, DEST.CLIENT.cursor.json), the placements and the
// decisions as JSON lines appended and synced before they count
// (DEST.chunks.jsonl, named for the snapshot chunks it held first, and
// DEST.decisions.jsonl). A last line cut short by a crash is left out:
// its chunk, transaction or decision never went out.
type FileKeeper struct {
	files FileStore
	dest  string
	mu    sync.Mutex // one write at a time
}

var _ Keeper = (*FileKeeper)(nil)

// NewFileKeeper returns the keeper of destination dest in dir, which is
// made when the first thing is kept.
func NewFileKeeper(dir, dest string) *FileKeeper {
	return &FileKeeper{files: FileStore{Dir: dir}, dest: dest}
}

// cursorSuffix ends the name of a cursor file.
const cursorSuffix = ".cursor.json"

// Cursors implements Keeper.
func (f *FileKeeper) Cursors() (map[string]*Cursor, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]*Cursor{}
	entries, err := os.ReadDir(f.files.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("group: load cursors: %w", err)
	}
	for _, e := range entries {
		// A destination's name has no dot (spec), so DEST. starts only
		// its own files.
		client, ok := strings.CutPrefix(e.Name(), f.dest+".")
		if !ok || e.IsDir() {
			continue
		}
		if client, ok = strings.CutSuffix(client, cursorSuffix); !ok || client == "" {
			continue
		}
		c, err := f.files.Load(f.dest, client)
		if err != nil {
			return nil, err
		}
		if c != nil {
			out[client] = c
		}
	}
	return out, nil
}

// SaveCursor implements Keeper: the file is replaced when it returns.
func (f *FileKeeper) SaveCursor(client string, c *Cursor) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.files.Save(f.dest, client, c)
}

// ForgetCursor implements Keeper.
func (f *FileKeeper) ForgetCursor(client string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := os.Remove(f.files.path(f.dest, client)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("group: forget cursor: %w", err)
	}
	return nil
}

func (f *FileKeeper) decisionsPath() string {
	return filepath.Join(f.files.Dir, f.dest+".decisions.jsonl")
}

func (f *FileKeeper) placementsPath() string {
	return filepath.Join(f.files.Dir, f.dest+".chunks.jsonl")
}

// Decisions implements Keeper.
func (f *FileKeeper) Decisions() ([]DDLDecision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return readLines[DDLDecision](f.decisionsPath(), "shard-DDL decision log")
}

// KeepDecision implements Keeper: the line is on disk when it returns.
func (f *FileKeeper) KeepDecision(_ context.Context, d DDLDecision) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := appendLine(f.files.Dir, f.decisionsPath(), d); err != nil {
		return fmt.Errorf("group: keep shard-DDL decision: %w", err)
	}
	return nil
}

// Placements implements Keeper.
func (f *FileKeeper) Placements() ([]Placement, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return readLines[Placement](f.placementsPath(), "placement log (snapshot chunks, late transactions)")
}

// KeepPlacement implements Keeper: the line is on disk when it returns.
func (f *FileKeeper) KeepPlacement(_ context.Context, p Placement) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := appendLine(f.files.Dir, f.placementsPath(), p); err != nil {
		return fmt.Errorf("group: keep placement: %w", err)
	}
	return nil
}

// Close implements Keeper: every write is done when it returns.
func (f *FileKeeper) Close() error { return nil }

// readLines reads a log of JSON lines (none if the file does not exist);
// a last line without its newline is left out.
func readLines[T any](path, what string) ([]T, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("group: load %s: %w", what, err)
	}
	var out []T
	for len(data) > 0 {
		line, rest, complete := bytes.Cut(data, []byte("\n"))
		data = rest
		if !complete {
			break
		}
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			return nil, fmt.Errorf("group: %s %s is damaged (%v): delete it and the cursors beside it to start over", what, path, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// appendLine appends v as a JSON line to path, in dir, and syncs it.
func appendLine(dir, path string, v any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = fh.Write(append(line, '\n'))
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
}
