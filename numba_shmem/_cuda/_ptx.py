"""Inline PTX for the device API: system-scope loads, stores, atomics, fences.

NVVM drops LLVM's atomic orderings and scopes, so every access whose scope or
ordering matters is inline PTX, marked as having side effects and clobbering
memory so that it is neither hoisted out of a loop nor merged.

Each helper emits code into a lowering: ``builder`` is the llvmlite IR builder,
addresses are i64 values (generic address space).
"""

from llvmlite import ir

i8, i16, i32, i64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
f32, f64 = ir.FloatType(), ir.DoubleType()

#: register constraint letter for each LLVM type
_REG = {8: "h", 16: "h", 32: "r", 64: "l"}


def _reg(llty):
    if isinstance(llty, ir.FloatType):
        return "f"
    if isinstance(llty, ir.DoubleType):
        return "d"
    return _REG[llty.width]


def asm(builder, rettype, text, constraints, args):
    """Emit one inline PTX statement with side effects and a memory clobber."""
    fnty = ir.FunctionType(rettype, [arg.type for arg in args])
    constraints = f"{constraints},~{{memory}}" if constraints else "~{memory}"
    code = ir.InlineAsm(fnty, text, constraints, side_effect=True)
    return builder.call(code, args)


def load(builder, address, llty, sem="acquire"):
    """``ld.<sem>.sys`` of an integer or float at ``address``."""
    bits = llty.width if isinstance(llty, ir.IntType) else (32 if isinstance(llty, ir.FloatType) else 64)
    kind = "f" if not isinstance(llty, ir.IntType) else "b"
    if isinstance(llty, ir.IntType) and bits == 8:
        # 8-bit values travel in 16-bit registers
        value = asm(builder, i16, f"ld.{sem}.sys.u8 $0, [$1];", "=h,l", [address])
        return builder.trunc(value, i8)
    return asm(builder, llty, f"ld.{sem}.sys.{kind}{bits} $0, [$1];", f"={_reg(llty)},l", [address])


def store(builder, address, value, sem="release"):
    """``st.<sem>.sys`` of ``value`` at ``address``."""
    llty = value.type
    if isinstance(llty, ir.IntType) and llty.width == 8:
        wide = builder.zext(value, i16)
        asm(builder, ir.VoidType(), f"st.{sem}.sys.u8 [$0], $1;", "l,h", [address, wide])
        return
    bits = llty.width if isinstance(llty, ir.IntType) else (32 if isinstance(llty, ir.FloatType) else 64)
    kind = "f" if not isinstance(llty, ir.IntType) else "b"
    asm(builder, ir.VoidType(), f"st.{sem}.sys.{kind}{bits} [$0], $1;", f"l,{_reg(llty)}",
        [address, value])


def atomic(builder, op, ptx_type, address, value, compare=None, fetch=True):
    """``atom.relaxed.sys.global.<op>.<type>`` (or ``red`` when the result is
    unused) at a generic ``address`` of global memory (the symmetric heap).

    In the global state space, after ``cvta.to.global``: a generic atomic
    compiles to ``ATOM`` behind a branch for shared memory (``ATOMS``), and on
    an H200 a chain of them each waited for the last, 182 ns apiece toward a
    peer; ``ATOMG`` overlap, 34 ns."""
    llty = value.type
    reg = _reg(llty)

    def in_global(operand, text):
        return f"{{ .reg .u64 a; cvta.to.global.u64 a, {operand}; {text} }}"
    if compare is not None:
        return asm(builder, llty,
                   in_global("$1", f"atom.relaxed.sys.global.cas.{ptx_type} $0, [a], $2, $3;"),
                   f"={reg},l,{reg},{reg}", [address, compare, value])
    if fetch:
        return asm(builder, llty,
                   in_global("$1", f"atom.relaxed.sys.global.{op}.{ptx_type} $0, [a], $2;"),
                   f"={reg},l,{reg}", [address, value])
    asm(builder, ir.VoidType(), in_global("$0", f"red.relaxed.sys.global.{op}.{ptx_type} [a], $1;"),
        f"l,{reg}", [address, value])
    return None


def fence(builder, sem="sc", scope="sys"):
    """``fence.<sem>.<scope>``: ``acq_rel`` orders, ``sc`` also completes."""
    asm(builder, ir.VoidType(), f"fence.{sem}.{scope};", "", [])


def nanosleep(builder, nanoseconds):
    asm(builder, ir.VoidType(), "nanosleep.u32 $0;", "r", [nanoseconds])


def globaltimer(builder):
    return asm(builder, i64, "mov.u64 $0, %globaltimer;", "=l", [])


def trap(builder):
    asm(builder, ir.VoidType(), "trap;", "", [])


def per_call(builder, value):
    """``value`` (an i32 or i64) through a move with side effects and no memory
    clobber: LLVM neither hoists it out of a loop nor merges it with another
    call's, so that what is computed from it is computed anew at each call."""
    assert value.type in (i32, i64), value.type
    fnty = ir.FunctionType(value.type, [value.type])
    reg = _reg(value.type)
    code = ir.InlineAsm(fnty, f"mov.b{value.type.width} $0, $1;", f"={reg},{reg}",
                        side_effect=True)
    return builder.call(code, [value])
