package bootstrap

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/secret"
)

// rawJoin runs a rank's side of the hello and the secret handshake by hand on c (key: the
// rank's secret, zero for none) and returns the service's answer (mWelcome or mError).
func rawJoin(t *testing.T, c net.Conn, rank, size int, key secret.Key) frame {
	t.Helper()
	h := hello{rank: rank, size: size, nonce: secret.Nonce()}
	require.NoError(t, writeFrame(c, mHello, h.encode()))
	f, err := readFrame(c)
	require.NoError(t, err)
	if f.typ != mChallenge {
		return f
	}
	ch, err := decodeChallenge(f.payload)
	require.NoError(t, err)
	proof, err := answerChallenge(key, &h, &ch)
	require.NoError(t, err)
	require.NoError(t, writeFrame(c, mAuth, encodeAuth(proof)))
	f, err = readFrame(c)
	require.NoError(t, err)
	return f
}

// fakeAdmit is an unkeyed service's side of the handshake, for fake services in tests: read the
// hello, challenge, read the (empty) proof; the caller sends the welcome.
func fakeAdmit(c net.Conn) error {
	f, err := readFrame(c)
	if err != nil {
		return err
	}
	h, err := decodeHello(f.payload)
	if err != nil {
		return err
	}
	ch := makeChallenge(secret.Key{}, false, &h, secret.Nonce())
	if err := writeFrame(c, mChallenge, ch.encode()); err != nil {
		return err
	}
	_, err = readFrame(c)
	return err
}

func TestAuthCore(t *testing.T) {
	k, _ := secret.New()
	other, _ := secret.New()
	h := hello{rank: 1, size: 4, jobID: "j", nonce: secret.Nonce()}
	sn := secret.Nonce()

	// keyed: both sides prove the secret
	ch := makeChallenge(k, true, &h, sn)
	dch, err := decodeChallenge(ch.encode())
	require.NoError(t, err)
	proof, err := answerChallenge(k, &h, &dch)
	require.NoError(t, err)
	require.NoError(t, checkAuth(k, true, &h, sn, encodeAuth(proof)))
	// a rank with another secret, or none, refuses the service and has no proof to give
	_, err = answerChallenge(other, &h, &dch)
	require.ErrorIs(t, err, ErrAuth)
	_, err = answerChallenge(secret.Key{}, &h, &dch)
	require.ErrorIs(t, err, ErrAuth)
	// the service refuses: no proof, another key's proof, a proof for other fields (replay
	// under another server nonce, another rank)
	require.ErrorIs(t, checkAuth(k, true, &h, sn, encodeAuth(nil)), ErrAuth)
	require.ErrorIs(t, checkAuth(k, true, &h, sn, encodeAuth(other.MAC(labelRDVClient, h.fields(sn)...))), ErrAuth)
	require.ErrorIs(t, checkAuth(k, true, &h, secret.Nonce(), encodeAuth(proof)), ErrAuth)
	h2 := h
	h2.rank = 2
	require.ErrorIs(t, checkAuth(k, true, &h2, sn, encodeAuth(proof)), ErrAuth)
	// the server's own proof is not a client proof (labels)
	require.ErrorIs(t, checkAuth(k, true, &h, sn, encodeAuth(ch.proof)), ErrAuth)
	require.ErrorIs(t, checkAuth(k, true, &h, sn, []byte{1}), ErrProtocol)

	// unkeyed: no proofs; a rank with a secret refuses such a service
	uch := makeChallenge(k, false, &h, sn)
	duch, err := decodeChallenge(uch.encode())
	require.NoError(t, err)
	proof, err = answerChallenge(secret.Key{}, &h, &duch)
	require.NoError(t, err)
	require.Empty(t, proof)
	require.NoError(t, checkAuth(k, false, &h, sn, encodeAuth(nil)))
	_, err = answerChallenge(k, &h, &duch)
	require.ErrorIs(t, err, ErrAuth)

	// the welcome's secret
	got, err := secretFromWelcome(secret.Key{}, false, welcomeSecret(k, false))
	require.NoError(t, err)
	require.True(t, got.Equal(k))
	require.Nil(t, welcomeSecret(k, true))
	got, err = secretFromWelcome(k, true, nil)
	require.NoError(t, err)
	require.True(t, got.Equal(k))
	_, err = secretFromWelcome(k, true, []byte{1})
	require.ErrorIs(t, err, ErrProtocol)
	_, err = secretFromWelcome(secret.Key{}, false, nil)
	require.ErrorIs(t, err, ErrProtocol)

	// malformed challenges and hellos
	for _, p := range [][]byte{nil, {2, 0, 0, 0, 0, 0, 0, 0, 0}, (&challenge{keyed: true, nonce: sn}).encode(),
		(&challenge{nonce: sn, proof: make([]byte, 32)}).encode(), (&challenge{nonce: sn[:5]}).encode()} {
		_, err := decodeChallenge(p)
		require.ErrorIs(t, err, ErrProtocol, "%x", p)
	}
	_, err = decodeHello((&hello{rank: 1, size: 2, nonce: []byte{1}}).encode())
	require.ErrorIs(t, err, ErrProtocol)
}

// TestKeyedRendezvous: a keyed service (goarmci run's) admits ranks with the job's secret and
// refuses, counts and survives everything else: garbage, truncated frames, a hello without a
// proof, a proof made with another secret, a replayed proof. The job's ranks then still run.
func TestKeyedRendezvous(t *testing.T) {
	k, _ := secret.New()
	other, _ := secret.New()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s, err := NewServer(ln, 2, WithJobID("j"), WithSecret(k))
	require.NoError(t, err)
	defer s.Close()

	refused := func(f func(c net.Conn)) {
		t.Helper()
		before := s.Rejected()
		c := rawConn(t, s)
		f(c)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		// the service hangs up (after its error frame, if any)
		for {
			if _, err := readFrame(c); err != nil {
				break
			}
		}
		assert.Equal(t, before+1, s.Rejected())
	}
	refused(func(c net.Conn) { _, _ = c.Write([]byte("\x00\x01garbage that is no frame at all")) })
	refused(func(c net.Conn) {
		_, _ = c.Write([]byte{wireVersion, mHello, 0, 0, 0, 40, 1, 2})
		c.(*net.TCPConn).CloseWrite()
	})
	refused(func(c net.Conn) { _ = writeFrame(c, mHello, []byte{0, 0, 0}) })
	refused(func(c net.Conn) { // a valid-format hello, then no proof
		h := hello{rank: 0, size: 2, nonce: secret.Nonce()}
		_ = writeFrame(c, mHello, h.encode())
		_, _ = readFrame(c)
		_ = writeFrame(c, mAuth, encodeAuth(nil))
	})
	refused(func(c net.Conn) { // a proof with another secret
		h := hello{rank: 0, size: 2, nonce: secret.Nonce()}
		_ = writeFrame(c, mHello, h.encode())
		f, _ := readFrame(c)
		ch, _ := decodeChallenge(f.payload)
		_ = writeFrame(c, mAuth, encodeAuth(other.MAC(labelRDVClient, h.fields(ch.nonce)...)))
	})
	refused(func(c net.Conn) { // a proof captured from another exchange (another server nonce)
		h := hello{rank: 0, size: 2, nonce: secret.Nonce()}
		_ = writeFrame(c, mHello, h.encode())
		_, _ = readFrame(c)
		_ = writeFrame(c, mAuth, encodeAuth(k.MAC(labelRDVClient, h.fields(secret.Nonce())...)))
	})
	// A rank without the secret gets a clear error.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = Connect(ctx, rankInfo(s, 0, 2))
	require.ErrorIs(t, err, ErrAuth)
	require.Nil(t, s.Err(), "refused connections fail no rank")

	// The job's ranks join and work.
	var wg sync.WaitGroup
	clients := make([]*Client, 2)
	errs := make([]error, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info := rankInfo(s, r, 2)
			info.Secret = k
			clients[r], errs[r] = Connect(ctx, info)
		}()
	}
	wg.Wait()
	for r := range 2 {
		require.NoError(t, errs[r])
		require.Equal(t, k.Bytes(), clients[r].JobSecret())
	}
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, c.Barrier(ctx))
		}()
	}
	wg.Wait()
	for _, c := range clients {
		require.NoError(t, c.Close())
	}
}

// TestKeyedServiceRefusesImpostorAndRank: a rank with a secret refuses a service without one or
// with another (a port taken by another job), before sending any proof.
func TestRankRefusesWrongService(t *testing.T) {
	k, _ := secret.New()
	other, _ := secret.New()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, opt := range []ServerOption{WithSecret(other), WithJobID("unkeyed")} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		s, err := NewServer(ln, 1, opt)
		require.NoError(t, err)
		info := rankInfo(s, 0, 1)
		info.Secret = k
		_, err = Connect(ctx, info)
		require.ErrorIs(t, err, ErrAuth)
		s.Close()
	}
}

// TestUnkeyedServiceHandsOutSecret: rank 0's service without GOARMCI_JOB_SECRET (srun, mpirun)
// generates the job's secret and every rank gets the same one.
func TestUnkeyedServiceHandsOutSecret(t *testing.T) {
	s := startServer(t, 3)
	var mu sync.Mutex
	var got [][]byte
	runRanks(t, s, 3, func(c *Client) error {
		mu.Lock()
		got = append(got, c.JobSecret())
		mu.Unlock()
		return nil
	})
	require.Len(t, got, 3)
	require.Len(t, got[0], secret.Size)
	require.Equal(t, got[0], got[1])
	require.Equal(t, got[0], got[2])
}

func TestDetectJobSecret(t *testing.T) {
	k, _ := secret.New()
	env := map[string]string{"GOARMCI_RANK": "0", "GOARMCI_SIZE": "1", "GOARMCI_JOB_SECRET": k.Hex()}
	lookup := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	info, err := DetectEnv(lookup)
	require.NoError(t, err)
	require.True(t, info.Secret.Equal(k))
	require.NotContains(t, info.String(), k.Hex()[:8])
	env["GOARMCI_JOB_SECRET"] = "abc"
	_, err = DetectEnv(lookup)
	require.ErrorIs(t, err, ErrBadEnv)
	require.NotContains(t, err.Error(), "abc")
}
