/* Unicode NFC for the tokenizers whose tokenizer.json asks for it (Qwen2,
 * Qwen3): with ICU when the build found it (TPS_HAVE_ICU, libicu-dev).
 * Without ICU, text is left as it is: exact for ASCII and for text already
 * in NFC (most text); decomposed text (an e and a combining acute) may
 * then count differently from Hugging Face's tokenizer.
 * Not here: NFD, NFKC, NFKD (tokenizer_hf.c refuses them by name). */
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer_internal.h"

#ifdef TPS_HAVE_ICU
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#endif

static bool all_ascii(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return false;
    return true;
}

#ifdef TPS_HAVE_ICU
/* UTF-8 -> UTF-16 -> NFC -> UTF-8 in buf; invalid UTF-8 is left as it is
 * (the BPE encodes its bytes). */
static int nfc_icu(sbuf *buf) {
    UErrorCode ec = U_ZERO_ERROR;
    const UNormalizer2 *nfc = unorm2_getNFCInstance(&ec);
    if (U_FAILURE(ec)) return 0;
    int32_t n16 = 0;
    u_strFromUTF8(NULL, 0, &n16, buf->p, (int32_t)buf->len, &ec);
    if (ec != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(ec)) return 0; /* invalid UTF-8 */
    ec = U_ZERO_ERROR;
    UChar *src = malloc(((size_t)n16 + 1) * sizeof *src);
    UChar *dst = malloc(((size_t)n16 * 3 + 1) * sizeof *dst);
    char *out = malloc((size_t)n16 * 9 + 1);
    int rc = src && dst && out ? 0 : TPS_ENOMEM;
    int32_t nd = 0, n8 = 0;
    if (!rc) u_strFromUTF8(src, n16 + 1, NULL, buf->p, (int32_t)buf->len, &ec);
    if (!rc && !U_FAILURE(ec)) nd = unorm2_normalize(nfc, src, n16, dst, n16 * 3 + 1, &ec);
    if (!rc && !U_FAILURE(ec)) u_strToUTF8(out, n16 * 9 + 1, &n8, dst, nd, &ec);
    if (!rc && !U_FAILURE(ec)) {
        sbuf_truncate(buf, 0);
        sbuf_add(buf, out, (size_t)n8);
        rc = sbuf_failed(buf) ? TPS_ENOMEM : 0;
    }
    free(out);
    free(dst);
    free(src);
    return rc;
}
#endif

int tok_nfc(sbuf *buf) {
    if (!buf->len || all_ascii(buf->p, buf->len)) return 0;
#ifdef TPS_HAVE_ICU
    return nfc_icu(buf);
#else
    return 0;
#endif
}
