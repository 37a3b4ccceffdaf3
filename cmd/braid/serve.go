package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/braid-cdc/braid/api/canal"
	"github.com/braid-cdc/braid/api/native"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// serveOptions are the consumer servers capture runs instead of printing.
type serveOptions struct {
	listen    string // address to listen on
	httpPort  int    // native HTTP API; 0: off
	canalPort int    // canal's TCP protocol; 0: off
	// canalUser and canalPassword authenticate canal clients; no user
	// accepts every client (with a warning at start).
	canalUser, canalPassword string
}

func (o serveOptions) enabled() bool { return o.httpPort > 0 || o.canalPort > 0 }

// serve runs the destination into a store and serves it to consumers until
// ctx ends.
func serve(ctx context.Context, spec *spec.Spec, opt serveOptions, log *slog.Logger) error {
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: spec, Logger: log})
	if err != nil {
		return err
	}
	defer p.Close()
	reg := stream.NewRegistry()
	reg.Add(p.Served(nil))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	errs := make(chan error, 2)
	if opt.httpPort > 0 {
		l, err := net.Listen("tcp", net.JoinHostPort(opt.listen, strconv.Itoa(opt.httpPort)))
		if err != nil {
			return fmt.Errorf("http port: %w: is another process using it? choose another with --http-port", err)
		}
		srv := native.NewServer(native.NewHandler(reg, log))
		log.Info("serving the native API", "addr", "http://"+l.Addr().String(), "dest", spec.Name)
		wg.Go(func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- err
			}
		})
		wg.Go(func() {
			<-ctx.Done()
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			srv.Shutdown(sctx)
			srv.Close() // streams are long-lived: do not wait for them
		})
	}
	if opt.canalPort > 0 {
		l, err := net.Listen("tcp", net.JoinHostPort(opt.listen, strconv.Itoa(opt.canalPort)))
		if err != nil {
			return fmt.Errorf("canal port: %w: is another process (a canal server?) using it? choose another with --canal-port", err)
		}
		srv := canal.NewServer(canal.Config{Registry: reg, User: opt.canalUser, Password: opt.canalPassword, Logger: log})
		log.Info("serving canal's protocol", "addr", l.Addr().String(), "dest", spec.Name)
		wg.Go(func() {
			if err := srv.Serve(ctx, l); err != nil {
				errs <- err
			}
		})
	}
	select {
	case <-ctx.Done():
		return nil
	case <-p.Done():
		return p.Err() // nil only when ctx ended
	case err := <-errs:
		return err
	}
}
