/* A stand-in libcupti.so.13 for the preload's CUPTI wrappers test: each entry point answers with its
   own number, so the test sees which function a call reached. */
int cuptiActivityRegisterCallbacks(void* request, void* complete) {
  (void)request;
  (void)complete;
  return 4201;
}
int cuptiActivityRegisterTimestampCallback(void* callback) {
  (void)callback;
  return 4202;
}
int cuptiSubscribe(void* subscriber, void* callback, void* userdata) {
  (void)subscriber;
  (void)callback;
  (void)userdata;
  return 4203;
}
int cuptiSubscribe_v2(void* s, void* c, void* u, void* p) {
  (void)s;
  (void)c;
  (void)u;
  (void)p;
  return 4204;
}
int cuptiFinalize(void) { return 4205; }
