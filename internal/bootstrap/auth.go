package bootstrap

import (
	"errors"
	"fmt"
	"time"

	"github.com/goarmci/goarmci/internal/secret"
)

// ErrAuth: the job-secret handshake of the rendezvous failed: a rank that does not prove the
// job's secret (GOARMCI_JOB_SECRET) to a service that has one, or a service that does not prove
// it to a rank that has one.
var ErrAuth = errors.New("bootstrap: authentication failed")

// The rendezvous handshake (wire version 3), before a rank joins:
//
//	rank → service  mHello      rank, size, job id, client nonce
//	service → rank  mChallenge  keyed, server nonce, server proof (keyed: MAC("server", ...))
//	rank → service  mAuth       client proof (keyed: MAC("client", ...); else empty)
//	service → rank  mWelcome    job id, timeouts, the job secret (unkeyed services only)
//
// A keyed service (WithSecret: goarmci run's, or rank 0's when every rank has
// GOARMCI_JOB_SECRET) and its ranks prove the secret to each other over both nonces and the
// hello's fields, so neither a rank nor a service without the secret gets further, and a
// captured exchange cannot be replayed. An unkeyed service (rank 0's under srun, mpirun or
// mpiexec without GOARMCI_JOB_SECRET) has no shared secret to check: it generates the job's
// secret and hands it out in the welcome to whoever joins first as each rank, in clear on TCP.
// See README "Security" for what that does and does not protect.
//
// The decisions are the pure functions below; Connect and Server.serveConn do the I/O.

const (
	labelRDVServer = "goarmci/rdv/3/server"
	labelRDVClient = "goarmci/rdv/3/client"
)

// hello is a decoded mHello.
type hello struct {
	rank, size int
	jobID      string
	nonce      []byte
}

func (h *hello) encode() []byte {
	var e enc
	e.u32(uint32(h.rank))
	e.u32(uint32(h.size))
	e.str(h.jobID)
	e.bytes(h.nonce)
	return e.b
}

func decodeHello(p []byte) (hello, error) {
	d := dec{b: p}
	h := hello{rank: int(d.u32()), size: int(d.u32()), jobID: d.str(), nonce: d.bytes()}
	if err := d.done(); err != nil {
		return hello{}, err
	}
	if len(h.nonce) != secret.NonceSize {
		return hello{}, fmt.Errorf("%w: hello nonce of %d bytes", ErrProtocol, len(h.nonce))
	}
	return h, nil
}

// fields are the hello's fields every proof covers, with the server's nonce.
func (h *hello) fields(sNonce []byte) [][]byte {
	var e enc
	e.u32(uint32(h.rank))
	e.u32(uint32(h.size))
	return [][]byte{e.b, []byte(h.jobID), h.nonce, sNonce}
}

// challenge is a decoded mChallenge.
type challenge struct {
	keyed bool
	nonce []byte
	proof []byte
}

func (c *challenge) encode() []byte {
	var e enc
	if c.keyed {
		e.u8(1)
	} else {
		e.u8(0)
	}
	e.bytes(c.nonce)
	e.bytes(c.proof)
	return e.b
}

func decodeChallenge(p []byte) (challenge, error) {
	d := dec{b: p}
	k := d.u8()
	c := challenge{keyed: k == 1, nonce: d.bytes(), proof: d.bytes()}
	if err := d.done(); err != nil {
		return challenge{}, err
	}
	if k > 1 || len(c.nonce) != secret.NonceSize || c.keyed != (len(c.proof) == secret.MACSize) || !c.keyed && len(c.proof) != 0 {
		return challenge{}, fmt.Errorf("%w: malformed challenge", ErrProtocol)
	}
	return c, nil
}

// makeChallenge is the service's answer to h: keyed services prove the secret over both nonces.
func makeChallenge(key secret.Key, keyed bool, h *hello, sNonce []byte) challenge {
	c := challenge{keyed: keyed, nonce: sNonce}
	if keyed {
		c.proof = key.MAC(labelRDVServer, h.fields(sNonce)...)
	}
	return c
}

// answerChallenge is the rank's side: it checks the service's challenge against the rank's
// secret (zero: none) and returns the rank's proof. Errors wrap ErrAuth.
func answerChallenge(key secret.Key, h *hello, c *challenge) ([]byte, error) {
	switch {
	case c.keyed && key.IsZero():
		return nil, fmt.Errorf("%w: the rendezvous requires the job secret and this rank has none "+
			"(GOARMCI_JOB_SECRET is set by goarmci run; under another launcher set it for every rank or for none)", ErrAuth)
	case !c.keyed && !key.IsZero():
		return nil, fmt.Errorf("%w: this rank has a job secret (GOARMCI_JOB_SECRET) and the rendezvous has none: "+
			"it belongs to another job, or rank 0 was started without the secret", ErrAuth)
	case !c.keyed:
		return nil, nil
	case !key.Verify(c.proof, labelRDVServer, h.fields(c.nonce)...):
		return nil, fmt.Errorf("%w: the rendezvous does not know this job's secret (GOARMCI_JOB_SECRET)", ErrAuth)
	}
	return key.MAC(labelRDVClient, h.fields(c.nonce)...), nil
}

// checkAuth is the service's decision on the rank's mAuth payload. Errors wrap ErrAuth or
// ErrProtocol.
func checkAuth(key secret.Key, keyed bool, h *hello, sNonce, payload []byte) error {
	d := dec{b: payload}
	proof := d.bytes()
	if err := d.done(); err != nil {
		return err
	}
	if !keyed {
		if len(proof) != 0 {
			return fmt.Errorf("%w: a proof for a service without a secret", ErrProtocol)
		}
		return nil
	}
	if len(proof) != secret.MACSize || !key.Verify(proof, labelRDVClient, h.fields(sNonce)...) {
		return fmt.Errorf("%w: rank %d did not prove the job's secret", ErrAuth, h.rank)
	}
	return nil
}

func encodeAuth(proof []byte) []byte {
	var e enc
	e.bytes(proof)
	return e.b
}

// welcomeSecret is the secret an unkeyed service hands out in its welcome (none when keyed).
func welcomeSecret(key secret.Key, keyed bool) []byte {
	if keyed {
		return nil
	}
	return key.Bytes()
}

// secretFromWelcome is the rank's job secret after the welcome: its own (keyed), or the one the
// service handed out.
func secretFromWelcome(own secret.Key, keyed bool, handed []byte) (secret.Key, error) {
	if keyed {
		if len(handed) != 0 {
			return secret.Key{}, fmt.Errorf("%w: a keyed rendezvous handed out a secret", ErrProtocol)
		}
		return own, nil
	}
	k, err := secret.FromBytes(handed)
	if err != nil || k.IsZero() {
		return secret.Key{}, fmt.Errorf("%w: welcome without the job secret", ErrProtocol)
	}
	return k, nil
}

// rejectLog logs a refused connection on the rendezvous port, at most once per
// secret.LogEvery, and counts it.
func (s *Server) rejected(from string, cause error) {
	if log, sup := s.rejects.Add(time.Now()); log {
		s.log.Warn().Str("from", from).Err(cause).Uint64("refused", s.rejects.Count()).Uint64("not_logged", sup).
			Msg("rendezvous: refused a connection")
	}
}

// Rejected is the number of connections the service refused before they joined: protocol
// errors, hellos it refused, failed secret handshakes.
func (s *Server) Rejected() uint64 { return s.rejects.Count() }

// WithSecret makes the service keyed: every rank must prove key (the job's secret, which the
// ranks hold in GOARMCI_JOB_SECRET) in its hello, and the service proves it back. Without it the
// service generates the job's secret and hands it out in the welcome.
func WithSecret(key secret.Key) ServerOption {
	return func(s *Server) {
		if !key.IsZero() {
			s.key, s.keyed = key, true
		}
	}
}
