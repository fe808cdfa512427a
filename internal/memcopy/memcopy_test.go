package memcopy

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func fill(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed + i*7 + i>>9)
	}
}

// Every size around the REP MOVSB threshold and the page size, at every alignment pair of
// interest: the bytes copied, the count returned, and nothing written outside dst.
func TestCopyValues(t *testing.T) {
	sizes := []int{0, 1, 7, 8, 63, minRep - 1, minRep, minRep + 1, 4095, 4096, 4097, 65536 + 3, 1<<20 + 5}
	for _, n := range sizes {
		for _, off := range [][2]int{{0, 0}, {1, 0}, {0, 3}, {8, 16}, {64, 0}, {4095, 1}} {
			src := make([]byte, n+off[1]+64)
			dst := make([]byte, n+off[0]+64)
			fill(src, n)
			fill(dst, 200)
			want := bytes.Clone(dst)
			copy(want[off[0]:off[0]+n], src[off[1]:off[1]+n])
			got := Copy(dst[off[0]:off[0]+n], src[off[1]:off[1]+n])
			require.Equal(t, n, got, "size %d offsets %v", n, off)
			require.True(t, bytes.Equal(want, dst), "size %d offsets %v: wrong bytes", n, off)
		}
	}
}

// Lengths differ: min of the two, as copy.
func TestCopyShorterSide(t *testing.T) {
	src := make([]byte, 10000)
	fill(src, 1)
	dst := make([]byte, 5000)
	require.Equal(t, 5000, Copy(dst, src))
	require.Equal(t, src[:5000], dst)
	big := make([]byte, 20000)
	require.Equal(t, 10000, Copy(big, src))
	require.Equal(t, src, big[:10000])
	require.Zero(t, big[10000])
}

// Overlapping ranges in both directions behave as memmove.
func TestCopyOverlap(t *testing.T) {
	for _, shift := range []int{1, 64, 4096, -1, -64, -4096} {
		buf := make([]byte, 3*8192)
		fill(buf, 5)
		want := bytes.Clone(buf)
		lo := 8192
		n := 8192
		copy(want[lo+shift:lo+shift+n], want[lo:lo+n])
		require.Equal(t, n, Copy(buf[lo+shift:lo+shift+n], buf[lo:lo+n]))
		require.True(t, bytes.Equal(want, buf), "shift %d", shift)
	}
}

// Into and out of a shared mapping (the shm provider's segments are memfd mappings).
func TestCopySharedMapping(t *testing.T) {
	const n = 4 << 20
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANON)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	defer unix.Munmap(m)
	src := make([]byte, n)
	fill(src, 9)
	require.Equal(t, n, Copy(m, src))
	back := make([]byte, n)
	require.Equal(t, n, Copy(back, m))
	require.True(t, bytes.Equal(src, back))
}

// BenchmarkCopy compares Copy with the builtin copy between two page-aligned buffers holding
// real data, the same destination every time (a put_bw window): go test -bench Copy
// ./internal/memcopy.
func BenchmarkCopy(b *testing.B) {
	for _, n := range []int{4 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 1 << 20, 4 << 20} {
		src, dst := make([]byte, n), make([]byte, n)
		fill(src, 3)
		fill(dst, 4)
		for _, impl := range []struct {
			name string
			f    func(d, s []byte) int
		}{{"memcopy", Copy}, {"builtin", func(d, s []byte) int { return copy(d, s) }}} {
			b.Run(fmt.Sprintf("%s/%dKiB", impl.name, n>>10), func(b *testing.B) {
				b.SetBytes(int64(n))
				for b.Loop() {
					impl.f(dst, src)
				}
			})
		}
	}
}
