"""Makes the kernels of the chunked KDA forward / backward compilable on the host (tools/emu):
keeps each file up to its host launchers (which use <<< >>>) and turns shared memory into statics
or the shim's buffer. cp.async and the helpers of kda_mma.cuh switch to the shim's emulations
themselves, under CAKEGRAD_KDA_HOST_EMU."""
import re
import sys


def common(src):
    src = src.replace("extern __shared__ __align__(16) unsigned char smem_raw[];",
                      "unsigned char* smem_raw = g_dyn_smem;")
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


which, path = sys.argv[1], sys.argv[2]
text = open(path).read()
sys.stdout.write(forward(text) if which == "forward" else backward(text))
