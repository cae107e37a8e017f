/** Shared by the heatmap unit tests: n tokens, [CLS] … [SEP] around n − 2 words. */
export function tokens(n) {
  return Array.from({ length: n }, (_, k) => {
    const special = k === 0 || k === n - 1;
    return { text: special ? (k === 0 ? "[CLS]" : "[SEP]") : `w${k}`, special };
  });
}
