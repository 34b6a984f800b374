/* A library that links the (fake) libcupti, as libtorch_cuda links the real one, and calls it. */
int cuptiActivityRegisterCallbacks(void* request, void* complete);
int cuptiActivityRegisterTimestampCallback(void* callback);
int cuptiSubscribe(void* subscriber, void* callback, void* userdata);
int cuptiSubscribe_v2(void* s, void* c, void* u, void* p);
int cuptiFinalize(void);

int client_calls(int which) {
  switch (which) {
    case 0: return cuptiActivityRegisterCallbacks(0, 0);
    case 1: return cuptiActivityRegisterTimestampCallback(0);
    case 2: return cuptiSubscribe(0, 0, 0);
    case 3: return cuptiSubscribe_v2(0, 0, 0, 0);
    default: return cuptiFinalize();
  }
}
