package transport

import (
	"reflect"
	"testing"
	"time"
)

// FuzzSelector drives one selector (8 peers, h = 3) with arbitrary events and times: the bound
// holds after every call, the open count matches the connections, and a call that fails
// changes nothing.
func FuzzSelector(f *testing.F) {
	f.Add([]byte{0x10, 0x21, 0x32, 0x05, 0x43, 0x54, 0x65, 0x05, 0x76})
	f.Add([]byte{0x11, 0x11, 0x11, 0x05, 0x15, 0x25, 0x35, 0x45, 0x05, 0x62, 0x72})
	f.Fuzz(func(t *testing.T, ops []byte) {
		cfg := DefaultConfig()
		cfg.MaxRC = 3
		s, err := NewSelector(8, cfg)
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		for i, op := range ops {
			peer := int(op>>4) % 9 // 8 is out of range
			if i%3 == 0 {
				now = now.Add(time.Duration(op&0x0f) * 400 * time.Millisecond)
			}
			when := now
			if op&0x0f == 0x0f {
				when = now.Add(-time.Second) // in the past: must be refused
			}
			before := cloneSelector(s)
			switch op % 7 {
			case 0, 1, 2:
				err = s.RecordBatch(peer, int64(op%4)*100, 64, when)
			case 3:
				_, _, err = s.Admit(peer, when)
			case 4:
				err = s.Incoming(peer, when)
			case 5:
				_, err = s.Evaluate(when)
			case 6:
				if op&1 == 0 {
					err = s.ConnFailed(peer, when)
				} else {
					err = s.Closed(peer, when)
				}
			}
			if err != nil && !reflect.DeepEqual(cloneSelector(s), before) {
				t.Fatalf("op %#x: failed (%v) but changed the selector", op, err)
			}
			open := 0
			for _, c := range s.conns {
				if c != connNone {
					open++
				}
			}
			if open != s.Open() || open > cfg.MaxRC {
				t.Fatalf("op %#x: %d open, counted %d, bound %d", op, open, s.Open(), cfg.MaxRC)
			}
		}
	})
}
