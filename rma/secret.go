package rma

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/ibv/provider/tcp"
	"github.com/goarmci/goarmci/internal/secret"
)

// JobSecreter is implemented by a Bootstrap that hands every rank the job's secret
// (internal/bootstrap's Client: from GOARMCI_JOB_SECRET or the rendezvous' welcome; rmatest's
// Group): secret.Size bytes, equal on every rank. The runtime keys the tcp provider's stream
// handshakes and the UD connection manager's messages with it. With a Bootstrap that does not
// implement it, rank 0 makes one and hands it to the others through AllGather (the bootstrap's
// channel is then as private as the secret).
type JobSecreter interface {
	JobSecret() []byte
}

// jobSecret sets r.secret (Init, before any device is opened). Collective when the bootstrap
// has no secret of its own.
func (r *Runtime) jobSecret(ctx context.Context) error {
	if js, ok := r.boot.(JobSecreter); ok {
		k, err := secret.FromBytes(js.JobSecret())
		if err != nil {
			return fmt.Errorf("%w: the bootstrap's job secret: %w", ErrConfig, err)
		}
		if !k.IsZero() {
			r.secret = k
			return nil
		}
	}
	var mine []byte
	if r.rank == 0 {
		k, err := secret.New()
		if err != nil {
			return err
		}
		mine = k.Bytes()
	}
	parts, err := r.boot.AllGather(ctx, mine)
	if err != nil {
		return err
	}
	k, err := secret.FromBytes(parts[0])
	if err != nil || k.IsZero() {
		return fmt.Errorf("%w: rank 0 handed out no job secret", ErrConfig)
	}
	r.secret = k
	return nil
}

// Rejected is the number of attempts this rank refused from outside the job so far: streams to
// its tcp ports that did not prove the job's secret (or were garbage), and datagrams to its UD
// connection manager without the job's MAC. Each is also logged, at most one line per 10 s per
// device. The rendezvous service counts its own (bootstrap.Server.Rejected).
func (r *Runtime) Rejected() int64 {
	var n uint64
	for _, nw := range r.nets {
		if nw.kind == TransportTCP && r.cfg.NetworkDevice == nil {
			if c, err := tcp.Rejected(nw.dev); err == nil {
				n += c
			}
		}
		if nw.mgr != nil {
			n += nw.mgr.CM().Rejected()
		}
	}
	return int64(n)
}
