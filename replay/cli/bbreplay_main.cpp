// The bbreplay executable: all of it is in libbbreplay.so (bbreplay.cpp), which a Python host loads too.
extern "C" int bbreplay_main(int argc, char** argv);

int main(int argc, char** argv) { return bbreplay_main(argc, argv); }
