package statuspage

import (
	"embed"
	"io/fs"
)

//go:embed web
var web embed.FS

// Assets are the page's files: index.html, status.js and status.css.
var Assets fs.FS = mustSub(web, "web")

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // the directory is embedded above: it cannot be missing
	}
	return sub
}
