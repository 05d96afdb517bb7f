FROM python:3.11-slim
RUN pip install --no-cache-dir pytest==8.3.3
WORKDIR /app
COPY data/ /app/data/
RUN mkdir -p /app/output
COPY verifier/test_outputs.py /app/
