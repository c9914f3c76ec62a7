// Every differentiable operation braid offers, as free functions in namespace
// braid. One header per op family; this one includes them all.
#pragma once

#include "braid/autograd/engine.h"
#include "braid/autograd/node.h"
