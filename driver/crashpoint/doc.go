// Package crashpoint is the fault-injection seam of the crash tests
// (test/crash): built with the tag crashpoints, a carve started with
// CARVE_CRASH=Method:N kills itself with SIGKILL right after the Nth
// external command it runs while a CSI call of Method is in flight, so a
// test can stop an operation between any two of its steps and check that
// the CO's retry ends where an uninterrupted call would.
//
// Without the tag (every build but the crash tests'), Interceptors is
// empty and Wrap returns its argument: nothing of the seam is left.
package crashpoint
