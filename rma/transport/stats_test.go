package transport

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

func TestStatsWindowSlides(t *testing.T) {
	s, err := NewStats(4, 800*time.Millisecond) // slots of 100 ms
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := s.Record(1, 100, at(time.Duration(i)*100*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Record(2, 7, at(950*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		peer int
		now  time.Time
		span time.Duration
		want Recent
	}{
		{"whole window at the last message", 1, at(900 * time.Millisecond), 800 * time.Millisecond, Recent{8, 800}},
		{"half window", 1, at(900 * time.Millisecond), 400 * time.Millisecond, Recent{4, 400}},
		{"span rounded up to a slot", 1, at(900 * time.Millisecond), time.Millisecond, Recent{1, 100}},
		{"span capped at the window", 1, at(900 * time.Millisecond), time.Hour, Recent{8, 800}},
		{"window slid past some", 1, at(1300 * time.Millisecond), 800 * time.Millisecond, Recent{4, 400}},
		{"window slid past all", 1, at(2 * time.Second), 800 * time.Millisecond, Recent{}},
		{"other peer", 2, at(time.Second), 800 * time.Millisecond, Recent{1, 7}},
		{"silent peer", 3, at(time.Second), 800 * time.Millisecond, Recent{}},
		{"peer out of range", 4, at(time.Second), 800 * time.Millisecond, Recent{}},
	}
	for _, tt := range tests {
		if got := s.RecentAt(tt.peer, tt.now, tt.span); got != tt.want {
			t.Errorf("%s: RecentAt = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if got := s.Total(1); got != (Recent{10, 1000}) {
		t.Errorf("Total(1) = %+v", got)
	}
	if got := s.Rate(1, at(900*time.Millisecond)); got != 10 {
		t.Errorf("Rate = %v messages/s, want 10", got)
	}
	if got := s.Last(2); !got.Equal(at(950 * time.Millisecond)) {
		t.Errorf("Last(2) = %v", got)
	}
}

// TestStatsBatchEqualsRecords: a batch counts as its messages recorded one by one.
func TestStatsBatchEqualsRecords(t *testing.T) {
	one, _ := NewStats(2, time.Second)
	batch, _ := NewStats(2, time.Second)
	for i := range 5 {
		now := at(time.Duration(i) * 300 * time.Millisecond)
		for range 7 {
			if err := one.Record(1, 10, now); err != nil {
				t.Fatal(err)
			}
		}
		if err := batch.RecordBatch(1, 7, 70, now); err != nil {
			t.Fatal(err)
		}
		if err := batch.RecordBatch(0, 0, 0, now); err != nil { // nothing new: not a message
			t.Fatal(err)
		}
	}
	end := at(1200 * time.Millisecond)
	if one.RecentAt(1, end, time.Second) != batch.RecentAt(1, end, time.Second) || one.Total(1) != batch.Total(1) ||
		!one.Last(1).Equal(batch.Last(1)) || !batch.Last(0).IsZero() {
		t.Fatalf("batch %+v %+v, records %+v %+v", batch.RecentAt(1, end, time.Second), batch.Total(1),
			one.RecentAt(1, end, time.Second), one.Total(1))
	}
}

func TestStatsBadInputChangesNothing(t *testing.T) {
	s, _ := NewStats(3, time.Second)
	if err := s.Record(0, 1, at(time.Second)); err != nil {
		t.Fatal(err)
	}
	before := *s
	before.peers = append([]peerRecord(nil), s.peers...)
	for _, tt := range []struct {
		peer int
		n    int64
		now  time.Time
		want error
	}{
		{-1, 1, at(2 * time.Second), ErrBadPeer},
		{3, 1, at(2 * time.Second), ErrBadPeer},
		{0, 1, at(0), ErrBadTime},
		{0, -1, at(2 * time.Second), ErrBadEvent},
	} {
		if err := s.RecordBatch(tt.peer, 1, tt.n, tt.now); !errors.Is(err, tt.want) {
			t.Errorf("RecordBatch(%d, 1, %d, %v) = %v, want %v", tt.peer, tt.n, tt.now, err, tt.want)
		}
		if err := s.Record(tt.peer, tt.n, tt.now); !errors.Is(err, tt.want) {
			t.Errorf("Record(%d, %d, %v) = %v, want %v", tt.peer, tt.n, tt.now, err, tt.want)
		}
	}
	if err := s.RecordBatch(0, -1, 0, at(2*time.Second)); !errors.Is(err, ErrBadEvent) {
		t.Errorf("RecordBatch of -1 messages = %v", err)
	}
	if !reflect.DeepEqual(before, *s) {
		t.Error("rejected records changed the statistics")
	}
	for _, w := range []time.Duration{0, statBuckets - 1} {
		if _, err := NewStats(1, w); !errors.Is(err, ErrBadConfig) {
			t.Errorf("NewStats(window %v) = %v, want ErrBadConfig", w, err)
		}
	}
	if _, err := NewStats(-1, time.Second); !errors.Is(err, ErrBadConfig) {
		t.Errorf("NewStats(-1 peers) = %v", err)
	}
}
