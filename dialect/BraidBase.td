//===- BraidBase.td - braid dialect, types, attributes -----*- tablegen -*-===//
#ifndef BRAID_BASE_TD
#define BRAID_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Braid_Dialect : Dialect {
  let name = "braid";
  let cppNamespace = "::mlir::braid";
  let summary = "Tensor-parallel transformer compute and collective ops";
  let description = [{
    The `braid` dialect describes what ONE rank of a tensor-parallel
    (SPMD) transformer executes: compute ops on the rank's local tensor
    shards and the collectives that move data between the ranks of a
    device group. Every rank runs the same program.

    Device groups are symbols (`braid.device_group`); every collective
    names the group it runs over. Parameters record how this rank's slice
    was cut from the full checkpoint tensor so a runtime can load or
    generate exactly that slice. Each collective also exists in an
    asynchronous form: a `*_start` op returning a `!braid.handle` and a
    `braid.wait` that turns the handle back into the tensor.

    Tensors are what the runtime runs: statically shaped, of `bf16`, `f16`,
    `f32`, `i32` or `i64`, with at most 2^40 elements (and no dim above
    2^40), so that no byte count, offset or FLOP count derived from a shape
    overflows and every verified module can become a plan. A device group
    has at most 2^20 ranks, and so has the mesh of all groups (at most 64).

    Entry functions bind their arguments with `braid.input = "name"` or
    `braid.state = "name"` and their results with `braid.output = "name"` or
    `braid.state = "name"`: each a non-empty name, unique per function and
    kind, on a tensor as above; a state result has its argument's type.
    An output that each rank holds only a block of carries
    `braid.sharded = {group = @g, dim = d, size = n}`: the whole output is
    the blocks of @g's members along dim d in group-rank order, cut to n
    (the rest is padding). Runtimes return each rank's block; braid-run
    gathers them (`--keep-logits-sharded`).
  }];
  let useDefaultTypePrinterParser = 1;
  // `braid.stream` is a dialect attribute: verified wherever it appears.
  let hasOperationAttrVerify = 1;
  // braid.input / braid.state / braid.output bindings of entry functions.
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// The stream an op is issued on in scheduled IR (a non-negative
    /// integer; on every scheduled op of a function or on none).
    static constexpr ::llvm::StringLiteral kStreamAttrName = "braid.stream";
  }];
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

def Braid_HandleType : TypeDef<Braid_Dialect, "Handle"> {
  let mnemonic = "handle";
  let summary = "Handle to an in-flight asynchronous collective";
  let description = [{
    Returned by every `*_start` collective and consumed by exactly one
    `braid.wait`. The parameter is the type the wait produces: the
    collective's result tensor, or `none` for `send_start`.

    ```mlir
    %h = braid.all_reduce_start sum %x on @tp : tensor<8x64xbf16> -> !braid.handle<tensor<8x64xbf16>>
    %y = braid.wait %h : !braid.handle<tensor<8x64xbf16>> -> tensor<8x64xbf16>
    ```
  }];
  let parameters = (ins "::mlir::Type":$payload);
  let assemblyFormat = "`<` $payload `>`";
}

def Braid_EventType : TypeDef<Braid_Dialect, "Event"> {
  let mnemonic = "event";
  let summary = "A point in one stream that another stream can wait for";
  let description = [{
    Produced by `braid.event_record` on the producer's stream and consumed
    by any number of `braid.event_wait` ops on other streams. Being SSA,
    an event is recorded before it is waited wherever the IR is valid
    (dominance), so a scheduled function read top to bottom is always a
    valid serial execution.
  }];
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Braid_ReduceKind : I32EnumAttr<"ReduceKind", "reduction applied by a collective", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"max", 1>,
    I32EnumAttrCase<"min", 2>,
    I32EnumAttrCase<"prod", 3>]> {
  let cppNamespace = "::mlir::braid";
}

def Braid_GeluApprox : I32EnumAttr<"GeluApproximation", "GELU formulation", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::mlir::braid";
}

// transformers' ACT2FN functions other than SiLU and GELU (their own ops),
// named as ACT2FN names them.
def Braid_ActivationKind : I32EnumAttr<"ActivationKind",
    "elementwise activation function", [
    I32EnumAttrCase<"relu", 0>,
    I32EnumAttrCase<"relu2", 1>,
    I32EnumAttrCase<"relu6", 2>,
    I32EnumAttrCase<"leaky_relu", 3>,
    I32EnumAttrCase<"quick_gelu", 4>,
    I32EnumAttrCase<"sigmoid", 5>,
    I32EnumAttrCase<"tanh", 6>,
    I32EnumAttrCase<"mish", 7>,
    I32EnumAttrCase<"hardswish", 8>,
    I32EnumAttrCase<"gelu_10", 9>,
    I32EnumAttrCase<"laplace", 10>,
    I32EnumAttrCase<"sqrtsoftplus", 11>]> {
  let cppNamespace = "::mlir::braid";
}

//===----------------------------------------------------------------------===//
// Traits and op base classes
//===----------------------------------------------------------------------===//

// Marks the `*_start` half of an asynchronous collective; `braid.wait`
// accepts only handles produced by an op with this trait.
def Braid_AsyncStart : NativeOpTrait<"BraidAsyncStart">;

// Side-effect resources: communication (collectives of one rank are issued
// in a fixed order that every rank must share) and stream order (event
// record/wait). Declaring them keeps CSE, DCE and canonicalization from
// merging, dropping or reordering such ops.
def Braid_CommResource : Resource<"::mlir::braid::CommunicationResource">;
def Braid_StreamResource : Resource<"::mlir::braid::StreamOrderResource">;

def Braid_CollectiveKind : I32EnumAttr<"CollectiveKind", "kind of collective", [
    I32EnumAttrCase<"all_reduce", 0>,
    I32EnumAttrCase<"all_gather", 1>,
    I32EnumAttrCase<"reduce_scatter", 2>,
    I32EnumAttrCase<"all_to_all", 3>,
    I32EnumAttrCase<"broadcast", 4>,
    I32EnumAttrCase<"send", 5>,
    I32EnumAttrCase<"recv", 6>]> {
  let cppNamespace = "::mlir::braid";
}

// Every tensor a braid op reads or writes (handle payloads included) has at
// most 2^40 elements: element types are ODS constraints, sizes this trait.
def Braid_TensorLimits : NativeOpTrait<"BraidTensorLimits">;

class Braid_Op<string mnemonic, list<Trait> traits = []>
    : Op<Braid_Dialect, mnemonic, !listconcat(traits, [Braid_TensorLimits])>;

// The element types the runtime runs.
def Braid_Tensor : StaticShapeTensorOf<[BF16, F16, F32, I32, I64]>;
def Braid_FloatTensor : StaticShapeTensorOf<[BF16, F16, F32]>;
def Braid_IntTensor : StaticShapeTensorOf<[I32, I64]>;

#endif // BRAID_BASE_TD
