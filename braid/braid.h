// Everything a program that trains with braid uses, in one include:
//
//   #include <braid/braid.h>
//
// One header per layer's public surface, lower layers first. Headers left out
// (transport internals, CPU kernels, server internals) are still installed,
// since these include some of them, but are not meant to be used directly.
#pragma once

// base: errors, deadlines, RNG, the intra-op thread pool, safetensors
#include "braid/base/deadline.h"
#include "braid/base/error.h"
#include "braid/base/log.h"
#include "braid/base/rng.h"
#include "braid/base/safetensors.h"
#include "braid/base/thread_pool.h"

// tensor, autograd and the differentiable ops
#include "braid/autograd/gradcheck.h"
#include "braid/ops/ops.h"
#include "braid/tensor/backend.h"
#include "braid/tensor/tensor.h"

// nn: modules with named parameters
#include "braid/nn/activation.h"
#include "braid/nn/attention.h"
#include "braid/nn/conv.h"
#include "braid/nn/dropout.h"
#include "braid/nn/init.h"
#include "braid/nn/linear.h"
#include "braid/nn/loss.h"
#include "braid/nn/module.h"
#include "braid/nn/norm.h"
#include "braid/nn/sequential.h"
#include "braid/nn/weight_norm.h"

// optim: optimizers and learning-rate schedules
#include "braid/optim/adagrad.h"
#include "braid/optim/adam.h"
#include "braid/optim/clip.h"
#include "braid/optim/lamb.h"
#include "braid/optim/lars.h"
#include "braid/optim/lbfgs.h"
#include "braid/optim/loss_scaler.h"
#include "braid/optim/rmsprop.h"
#include "braid/optim/schedule.h"
#include "braid/optim/sgd.h"

// data: datasets, samplers, the prefetching loader
#include "braid/data/csv.h"
#include "braid/data/fashion_mnist.h"
#include "braid/data/libsvm.h"
#include "braid/data/loader.h"
#include "braid/data/open.h"
#include "braid/data/sampler.h"
#include "braid/data/sparse_batch.h"
#include "braid/data/text.h"
#include "braid/data/transforms.h"

// comm: communicators, collectives, transports, the rendezvous store
#include "braid/comm/communicator.h"
#include "braid/comm/env.h"
#include "braid/comm/transport/inproc.h"
#include "braid/comm/work.h"

// ps: parameter-server client and server
#include "braid/ps/client.h"
#include "braid/ps/server.h"

// parallel: joining a job, the mesh and the plans that distribute a step,
// the pipeline's stages and the tensor-parallel rewrite
#include "braid/parallel/bucketed_allreduce.h"
#include "braid/parallel/mesh.h"
#include "braid/parallel/parameter_server.h"
#include "braid/parallel/pipeline/partition.h"
#include "braid/parallel/pipeline/schedule.h"
#include "braid/parallel/pipeline/stage.h"
#include "braid/parallel/plan.h"
#include "braid/parallel/plan_factory.h"
#include "braid/parallel/process_group.h"
#include "braid/parallel/tensor_parallel/layers.h"
#include "braid/parallel/tensor_parallel/rewrite.h"

// graph: a training step captured as a dataflow graph, its passes, its
// partition across ranks and the executor that runs it
#include "braid/graph/capture.h"
#include "braid/graph/executor.h"
#include "braid/graph/graph.h"
#include "braid/graph/memory.h"
#include "braid/graph/partition.h"
#include "braid/graph/passes.h"
#include "braid/graph/serialize.h"
#include "braid/graph/step.h"
#include "braid/graph/work_depth.h"

// linear: linear models on sparse data and their solvers
#include "braid/linear/datasets.h"
#include "braid/linear/solvers.h"

// train: the trainer loop, configs, callbacks, checkpoints
#include "braid/train/callbacks_console.h"
#include "braid/train/checkpoint.h"
#include "braid/train/config.h"
#include "braid/train/metrics.h"
#include "braid/train/models.h"
#include "braid/train/pbt.h"
#include "braid/train/pbt_member.h"
#include "braid/train/sparse_training.h"
#include "braid/train/tensorboard.h"
#include "braid/train/trainer.h"
#include "braid/train/trainer_setup.h"

// sim: predicting a plan's step time from measured op and link costs
#include "braid/sim/engine.h"
#include "braid/sim/predict.h"
