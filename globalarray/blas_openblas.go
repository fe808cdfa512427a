//go:build openblas && cgo

package globalarray

/*
#cgo LDFLAGS: -lopenblas
void openblas_set_num_threads(int);
*/
import "C"

import (
	"os"

	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/cblas128"
	"gonum.org/v1/gonum/blas/cblas64"
	"gonum.org/v1/netlib/blas/netlib"
)

// With the build tag openblas (and cgo), the local matrix products of Gemm run on OpenBLAS
// through gonum's netlib binding instead of gonum's pure-Go BLAS: `go build -tags openblas`
// on a machine with OpenBLAS installed (Debian: libopenblas-dev). BLASBackend says which.
// OpenBLAS runs single-threaded unless OPENBLAS_NUM_THREADS or OMP_NUM_THREADS says otherwise:
// a GA job runs a rank per core, and threads of every rank's BLAS would oversubscribe them.
func init() {
	if os.Getenv("OPENBLAS_NUM_THREADS") == "" && os.Getenv("OMP_NUM_THREADS") == "" {
		C.openblas_set_num_threads(1)
	}
	blas64.Use(netlib.Implementation{})
	blas32.Use(netlib.Implementation{})
	cblas128.Use(netlib.Implementation{})
	cblas64.Use(netlib.Implementation{})
	blasBackend = "openblas"
}
