/* A real program whose work runs inside a large shared library, for the flow benchmark's
 * recorded inputs: optimise an LLVM IR file with libLLVM's O2 pipeline ROUNDS times
 * (through the C API, so no LLVM tool's crash handler claims SIGTRAP, which the branch
 * recorder needs).  usage: ipt-flow-llvm FILE.ll [ROUNDS] */
#include <stdio.h>
#include <stdlib.h>

#include <llvm-c/Core.h>
#include <llvm-c/IRReader.h>
#include <llvm-c/Transforms/PassBuilder.h>

int main(int argc, char **argv)
{
	int rounds = argc > 2 ? atoi(argv[2]) : 1;
	unsigned long insts = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE.ll [ROUNDS]\n", argv[0]);
		return 2;
	}
	for (int r = 0; r < rounds; r++) {
		LLVMContextRef ctx = LLVMContextCreate();
		LLVMMemoryBufferRef mb;
		LLVMModuleRef m;
		char *msg = NULL;

		if (LLVMCreateMemoryBufferWithContentsOfFile(argv[1], &mb, &msg) ||
		    LLVMParseIRInContext(ctx, mb, &m, &msg)) {
			fprintf(stderr, "%s: %s\n", argv[1], msg ? msg : "cannot read");
			return 1;
		}
		LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
		LLVMErrorRef err = LLVMRunPasses(m, "default<O2>", NULL, opts);

		if (err) {
			char *e = LLVMGetErrorMessage(err);

			fprintf(stderr, "passes: %s\n", e);
			LLVMDisposeErrorMessage(e);
			return 1;
		}
		for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
			for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b;
			     b = LLVMGetNextBasicBlock(b))
				for (LLVMValueRef i = LLVMGetFirstInstruction(b); i;
				     i = LLVMGetNextInstruction(i))
					insts++;
		LLVMDisposePassBuilderOptions(opts);
		LLVMDisposeModule(m);
		LLVMContextDispose(ctx);
	}
	printf("%lu instructions after O2\n", insts);
	return 0;
}
