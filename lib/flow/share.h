/* Blocks decoded once for all the flow decoders of one parallel decode (internal). Each
 * decoder keeps its own block cache (its links, counts and paths are its own); on a miss
 * it first copies the block from the share, which holds every block any of them decoded,
 * and decodes only what none has. A block is the image's bytes classified, the same for
 * every decoder of that image. */
#ifndef TK_FLOW_SHARE_H
#define TK_FLOW_SHARE_H

struct tk_flow;
struct tk_bshare;

/* NULL when out of memory (the decoders then decode alone). */
struct tk_bshare *tk_bshare_new(void);
void tk_bshare_free(struct tk_bshare *s);
/* F's cache asks S from now on; every decoder given S must decode the same image, and S
 * must outlive them. */
void tk_flow_share_blocks(struct tk_flow *f, struct tk_bshare *s);

#endif
