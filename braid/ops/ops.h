// Every differentiable operation braid offers, as free functions in namespace
// braid. One header per op family; this one includes them all.
#pragma once

#include "braid/autograd/engine.h"
#include "braid/autograd/node.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/ops/shape.h"
#include "braid/ops/activation.h"
#include "braid/ops/softmax.h"
#include "braid/ops/loss.h"
#include "braid/ops/index.h"
#include "braid/ops/norm.h"
#include "braid/ops/transformer.h"
#include "braid/ops/grouped_gemm.h"
#include "braid/ops/dropout.h"
#include "braid/ops/linear.h"
#include "braid/ops/autocast.h"
#include "braid/ops/matmul.h"
#include "braid/ops/conv.h"
#include "braid/ops/pool.h"
#include "braid/ops/attention.h"
