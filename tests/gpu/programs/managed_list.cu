// A linked list built in managed memory on the host and walked by a kernel,
// which writes each node's running sum back; the host checks it.
#include "common.h"

struct node {
  int value;
  long long sum;
  node *next;
};

__global__ void walk(node *head, long long *total, int *count) {
  long long s = 0;
  int c = 0;
  for (node *p = head; p; p = p->next) {
    s += p->value;
    p->sum = s;
    c++;
  }
  *total = s;
  *count = c;
}

int main(void) {
  test_init();
  const int n = 20000;
  node *nodes;
  long long *total;
  int *count;
  CK(cudaMallocManaged(&nodes, n * sizeof(node)));
  CK(cudaMallocManaged(&total, sizeof(long long)));
  CK(cudaMallocManaged(&count, sizeof(int)));
  // Link the nodes in a scrambled order so the walk jumps between pages.
  int prev = -1;
  node *head = NULL;
  for (int k = 0; k < n; k++) {
    int i = (int)((k * 7919LL) % n);
    nodes[i].value = k + 1;
    nodes[i].sum = 0;
    nodes[i].next = NULL;
    if (prev < 0) head = &nodes[i];
    else nodes[prev].next = &nodes[i];
    prev = i;
  }
  walk<<<1, 1>>>(head, total, count);
  CK(cudaDeviceSynchronize());
  long long want = (long long)n * (n + 1) / 2;
  printf("count %d total %lld\n", *count, *total);
  EXPECT(*count == n && *total == want, "count %d total %lld", *count, *total);
  int bad = 0;
  long long s = 0;
  for (node *p = head; p; p = p->next) {
    s += p->value;
    bad += p->sum != s;
  }
  EXPECT(!bad, "%d running sums wrong", bad);
  CK(cudaFree(nodes));
  CK(cudaFree(total));
  CK(cudaFree(count));
  return test_finish();
}
