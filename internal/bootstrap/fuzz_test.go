package bootstrap

import (
	"errors"
	"testing"

	"github.com/goarmci/goarmci/internal/secret"
)

// FuzzParsePMILine: a line from the PMI-1 server gives a map with a cmd or ErrProtocol, never a
// panic.
func FuzzParsePMILine(f *testing.F) {
	f.Add("cmd=get_result rc=0 value=1.2.3.4:5")
	f.Add("cmd=barrier_out")
	f.Add("rc=1 msg")
	f.Add("")
	f.Fuzz(func(t *testing.T, line string) {
		kv, err := parsePMILine(line)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v is not ErrProtocol", err)
			}
			return
		}
		if kv["cmd"] == "" {
			t.Fatalf("%q parsed without cmd", line)
		}
	})
}

// FuzzHandshake: whatever a peer sends as hello, challenge or proof, the handshake's decoders
// and decisions give an error or go on, never panic, and no proof passes without the secret.
func FuzzHandshake(f *testing.F) {
	k, _ := secret.FromBytes(make([]byte, secret.Size))
	h := hello{rank: 1, size: 2, jobID: "j", nonce: make([]byte, secret.NonceSize)}
	sn := make([]byte, secret.NonceSize)
	ch := makeChallenge(k, true, &h, sn)
	f.Add(h.encode(), ch.encode(), encodeAuth(k.MAC(labelRDVClient, h.fields(sn)...)))
	f.Add([]byte{}, []byte{1}, []byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, hp, cp, ap []byte) {
		hh, err := decodeHello(hp)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("hello: %v", err)
			}
			hh = h
		}
		if ch, err := decodeChallenge(cp); err == nil {
			_, _ = answerChallenge(k, &hh, &ch)
		} else if !errors.Is(err, ErrProtocol) {
			t.Fatalf("challenge: %v", err)
		}
		other, _ := secret.New()
		if checkAuth(other, true, &hh, sn, ap) == nil {
			t.Fatalf("a proof passed under a key the fuzzer cannot know")
		}
	})
}
