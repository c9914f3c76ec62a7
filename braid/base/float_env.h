// Subnormal floats flushed to zero (`train.flush_denormals`): on x86 the
// MXCSR's flush-to-zero and denormals-are-zero bits, so a result too small for
// a normal float becomes 0 and a subnormal operand reads as 0. Intel cores
// take a microcode assist on every subnormal, several times slower than a
// normal operation; a model whose gradients or activations sink that low (a
// saturated softmax, weights decayed toward 0) slows down with nothing to
// show for it. The cost is IEEE gradual underflow: values below 1.2e-38 in
// f32 become 0.
//
// The bits are per thread. set_flush_denormals sets them on the calling
// thread and on every thread of the intra-op pool (parallel_for, and the
// OpenMP threads OpenBLAS and oneDNN share); threads started afterwards
// inherit them from the thread that starts them.
#pragma once

namespace braid {

// Whether this CPU has the bits (x86 with SSE); elsewhere set_flush_denormals(true) throws ConfigError.
bool can_flush_denormals();
void set_flush_denormals(bool on);
// The calling thread's setting.
bool flushing_denormals();

}  // namespace braid
