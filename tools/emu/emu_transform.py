"""Makes the kernels of the chunked KDA forward / backward and of the sequential backward's row
passes and segment scans compilable on the host (tools/emu):
keeps each file up to its host launchers (which use <<< >>>) and turns shared memory into statics
or the shim's buffer. cp.async and the helpers of kda_mma.cuh switch to the shim's emulations
themselves, under CAKEGRAD_KDA_HOST_EMU."""
import re
import sys


def common(src):
    src = src.replace("extern __shared__ __align__(16) unsigned char smem_raw[];",
                      "unsigned char* smem_raw = g_dyn_smem;")
    # The shim defines the cp.async helpers as plain copies.
    src = src.replace('#include "cp_async.cuh"', '// cp_async.cuh: the shim\'s')
    return re.sub(r"\b__shared__ ", "static ", src)


def replace_function(src, signature, body):
    start = src.index(signature)
    depth, i = 0, src.index("{", start)
    while True:
        if src[i] == "{":
            depth += 1
        elif src[i] == "}":
            depth -= 1
            if depth == 0:
                break
        i += 1
    return src[:start] + body + src[i + 1:]


def forward(src):
    cut = src.index("template <int kRows, bool kCheckpoint>\nStatus LaunchStateAs")
    src = src[:cut]
    # Revisions before kernels/cuda/cp_async.cuh defined their cp.async helpers in the file; the
    # shim's plain copies replace them (later revisions take the shim's directly).
    if "__device__ __forceinline__ void CpAsync16(" in src:
        src = replace_function(src, "__device__ __forceinline__ void CpAsync16(",
                               "inline void CpAsync16(void* smem, const void* gmem) {"
                               " std::memcpy(smem, gmem, 16); }")
        src = replace_function(src, "__device__ __forceinline__ void CpAsyncCommit()", "")
        src = replace_function(
            src, "template <int kPending>\n__device__ __forceinline__ void CpAsyncWait()", "")
    assert "asm" not in re.sub(r"//.*", "", src), "inline PTX left"
    return common(src) + "}  // namespace\n"


def backward(src):
    end = src.index("template <int kRows>\nStatus LaunchChainAs")
    return common(src[:end]) + "}  // namespace\n"


def up_to(marker):
    def cut(src):
        return common(src[:src.index(marker)]) + "}  // namespace\n"
    return cut


MODES = {
    "forward": forward,
    "backward": backward,
    "rowpass": up_to("}  // namespace\n\ntemplate <RowLaunch kLaunch>\nStatus LaunchRowKernel"),
    "segment": up_to("}  // namespace\n\nStatus LaunchSegmentScans"),
}
which, path = sys.argv[1], sys.argv[2]
sys.stdout.write(MODES[which](open(path).read()))
